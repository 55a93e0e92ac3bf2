package callbacks

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"

	"github.com/sourcegraph/conc/panics"
)

// Errors returned by a Stack. Use errors.Is.
var (
	// ErrClosed is returned by Push once Close has been called: the
	// callback is not stacked and will never run.
	ErrClosed = errors.New("callbacks: stack closed")
	// ErrNilFunc is returned by Push for a nil callback.
	ErrNilFunc = errors.New("callbacks: nil callback")
	// ErrGoexit is reported (wrapped, in Close's error) for a callback that
	// called runtime.Goexit, e.g. through testing.T.FailNow. The callbacks
	// below it still run, but the goroutine that called Close exits.
	ErrGoexit = errors.New("callbacks: callback called runtime.Goexit")
	// ErrCloseInCallback is returned by Close called by one of the
	// stack's own callbacks, on the goroutine that runs them: it would
	// wait for itself forever.
	ErrCloseInCallback = errors.New("callbacks: Close called from one of the stack's own callbacks (it would wait for itself); return from the callback instead, and let the Close that runs it finish")
)

// A Stack is a last-in, first-out stack of finalizers. Close runs every
// pushed callback exactly once, newest first, even when some of them fail or
// panic, and returns their errors joined.
//
// The zero value is an empty, open stack. A Stack must not be copied after
// first use. All methods are safe for concurrent use.
type Stack struct {
	mu      sync.Mutex
	fns     []entry
	nums    int           // callbacks pushed with Push: the next one's number
	closing bool          // Close has been called; Push refuses
	done    chan struct{} // closed when the first Close has run every callback
	err     error         // the joined result of the first Close
	closer  uint64        // the goroutine running the callbacks (goid)
}

// entry is a stacked callback and how errors name it: its number (its
// push index among the callbacks pushed with Push) or, from PushNamed,
// its name.
type entry struct {
	fn   func() error
	num  int
	name string
}

// label is how Close's errors name e.
func (e entry) label() string {
	if e.name != "" {
		return e.name
	}
	return fmt.Sprintf("callback %d", e.num)
}

// New returns an empty, open stack. It is equivalent to new(Stack).
func New() *Stack { return new(Stack) }

// Push stacks fn so that Close runs it before every callback pushed earlier.
// It returns an error wrapping ErrNilFunc for a nil fn, and one wrapping
// ErrClosed (without stacking fn) once Close has been called, including
// from a callback that Close is running; each names the call (with the
// number fn would have had) and the fix.
func (s *Stack) Push(fn func() error) error { return s.push(fn, "") }

// PushNamed is Push for a callback that Close's errors call name instead
// of numbering it: a layer's own teardown, stacked among its users'
// callbacks, does not shift their numbers (each is its push index among
// the callbacks pushed with Push).
func (s *Stack) PushNamed(name string, fn func() error) error {
	if name == "" {
		return fmt.Errorf("%w: PushNamed needs a name (Close's errors call the callback by it); use Push for a numbered one", ErrNilFunc)
	}
	return s.push(fn, name)
}

func (s *Stack) push(fn func() error, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	call := fmt.Sprintf("Push (callback %d)", s.nums)
	if name != "" {
		call = fmt.Sprintf("PushNamed(%q)", name)
	}
	if fn == nil {
		return fmt.Errorf("%w: %s was given a nil func (an unset variable, field or method value?), which Close could not run; pass the function Close should run", ErrNilFunc, call)
	}
	if s.closing {
		return fmt.Errorf("%w: %s came after Close began, so the callback was not stacked and will never run; stack finalizers before Close (a callback that Close is running cannot stack more: do that work in it directly)", ErrClosed, call)
	}
	e := entry{fn: fn, name: name}
	if name == "" {
		e.num = s.nums
		s.nums++
	}
	s.fns = append(s.fns, e)
	return nil
}

// Len returns the number of callbacks waiting to run: zero once Close has
// been called.
func (s *Stack) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.fns)
}

// Closed reports whether Close has been called (it may still be running).
func (s *Stack) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// Close runs every stacked callback once, last pushed first, on the calling
// goroutine. A callback that returns an error or panics does not stop the
// others: each error is wrapped with the callback's number, its push index
// among the callbacks pushed with Push (0 for the first), or the name
// PushNamed gave it, a panic becomes a *comm.PanicError carrying the value and stack,
// and all of them are returned joined with errors.Join in the order the
// callbacks ran. Close returns nil when every callback succeeded.
//
// Close is idempotent: later and concurrent calls block until the first
// call has finished and return the same error. A callback that calls
// Close on its own stack gets ErrCloseInCallback at once (waiting would
// be waiting for itself); it may call Push, which returns ErrClosed. (A
// goroutine a callback starts and waits for must not call Close either:
// that wait cannot be told apart from a concurrent caller's.)
func (s *Stack) Close() (err error) {
	me := goid()
	s.mu.Lock()
	if s.closing {
		done, closer := s.done, s.closer
		s.mu.Unlock()
		if closer == me && me != 0 {
			select {
			case <-done: // a Close after the first one ended, on its goroutine
			default:
				return ErrCloseInCallback
			}
		}
		<-done
		return s.err
	}
	s.closing = true
	s.closer = me
	s.done = make(chan struct{})
	fns := s.fns
	s.fns = nil
	s.mu.Unlock()

	var errs []error
	defer func() {
		// Deferred so that done is closed even when a callback calls
		// runtime.Goexit. s.err is written before done is closed and read
		// only after, so the channel orders the accesses.
		s.err = errors.Join(errs...)
		err = s.err
		close(s.done)
	}()
	runDown(fns, &errs)
	return nil // replaced by the deferred function
}

// runDown runs fns from last to first, appending their errors to errs. If a
// callback calls runtime.Goexit, the deferred function records it and runs
// the remaining callbacks while the goroutine unwinds.
func runDown(fns []entry, errs *[]error) {
	i := len(fns) - 1
	completed := false
	defer func() {
		if !completed {
			*errs = append(*errs, fmt.Errorf("callbacks: %s: %w", fns[i].label(), ErrGoexit))
			runDown(fns[:i], errs)
		}
	}()
	for ; i >= 0; i-- {
		if err := run(fns[i].fn); err != nil {
			*errs = append(*errs, fmt.Errorf("callbacks: %s: %w", fns[i].label(), err))
		}
		fns[i].fn = nil // let the closure be collected
	}
	completed = true
}

// run calls fn and turns a panic into a *comm.PanicError.
func run(fn func() error) error {
	var err error
	if p := panics.Try(func() { err = fn() }); p != nil {
		return p.AsError()
	}
	return err
}

// goid returns the calling goroutine's id, read from the first line of
// its stack trace ("goroutine 7 [running]:"); 0 if it cannot be read.
// Close alone calls it, once per call: it tells a callback calling Close
// on its own stack from a concurrent caller, which must wait.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b, ok := bytes.CutPrefix(b, []byte("goroutine "))
	if !ok {
		return 0
	}
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0
	}
	return id
}
