// Package callbacks provides a last-in, first-out stack of finalizers.
//
// A runtime tears down in the reverse order it was built: a library that
// initialised itself on top of MPI must finalize before MPI does. A Stack
// records teardown functions as they are registered and runs them, newest
// first, when it is closed:
//
//	s := callbacks.New()
//	_ = s.Push(db.Close)        // runs second
//	_ = s.Push(cache.Flush)     // runs first
//	err := s.Close()            // both errors, if any, joined
//
// # Guarantees
//
// Each callback runs exactly once. A callback that returns an error or
// panics does not stop the ones below it: a panic is recovered and becomes
// a *comm.PanicError with the panicking goroutine's stack, and every error is
// returned from Close joined with errors.Join, each wrapped with the
// callback's push index. Close is idempotent and safe for concurrent use:
// every caller gets the first call's result, after all callbacks have run.
// Push after Close returns an error wrapping ErrClosed and stacks nothing
// (Push of a nil func, one wrapping ErrNilFunc; both name the Push and the
// fix); Close called by one of the stack's own callbacks returns
// ErrCloseInCallback at once instead of waiting for itself.
//
// runtimeview uses a Stack for RuntimeView.StackCallback: the callbacks run
// at Close (or on SIGINT/SIGTERM) before MPI is finalized.
package callbacks
