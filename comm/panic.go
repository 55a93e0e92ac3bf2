package comm

import "github.com/sourcegraph/conc/panics"

// PanicError is the error a recovered panic becomes everywhere in pz: a
// rank's function run by comm/local's Run or runtimeview.Run, a finalizer
// of the callbacks stack. It holds the value passed to panic (Value), the
// panicking goroutine's stack (Stack) and its callers (Callers), and
// unwraps to the panic value when that is an error. It is
// sourcegraph/conc's panics.ErrRecovered.
type PanicError = panics.ErrRecovered
