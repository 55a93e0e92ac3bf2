package cuda

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// An executor runs functions on one goroutine locked to one OS thread.
// It knows nothing about CUDA: Context gives it the calls that make the
// context current on the thread and release it at the end.
type executor struct {
	tid  int // OS thread id of the goroutine (threadID)
	reqs chan *request
	quit chan struct{}
	done chan struct{} // closed when the goroutine has exited

	closeOnce sync.Once
	closeErr  error
}

// request states
const (
	pending int32 = iota
	started
	cancelled
)

type request struct {
	fn    func() error
	err   error
	state atomic.Int32
	done  chan struct{}
}

// startExecutor starts the goroutine, runs setup on its thread and waits
// for it. If setup fails the goroutine exits and the error is returned.
// teardown runs on the thread when the executor is closed; its error is
// what close returns.
func startExecutor(setup, teardown func() error) (*executor, error) {
	e := &executor{
		reqs: make(chan *request),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
	ready := make(chan error, 1)
	go e.run(setup, teardown, ready)
	// setup is bounded in time and cannot be interrupted; wait for it so
	// that the goroutine is never left behind.
	if err := <-ready; err != nil {
		<-e.done
		return nil, err
	}
	return e, nil
}

// run never unlocks its thread: when it returns, Go terminates the
// thread, so no other goroutine inherits a thread with state (such as a
// current CUDA context) left on it.
func (e *executor) run(setup, teardown func() error, ready chan<- error) {
	defer close(e.done)
	runtime.LockOSThread()
	e.tid = threadID()
	if err := runRecovered(setup); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for {
		select {
		case req := <-e.reqs:
			if req.state.CompareAndSwap(pending, started) {
				req.err = runRecovered(req.fn)
			}
			close(req.done)
		case <-e.quit:
			e.closeErr = runRecovered(teardown)
			return
		}
	}
}

// runRecovered runs fn and turns a panic into an error carrying the stack,
// so that a bad callback cannot kill the executor (and the process).
func runRecovered(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("cuda: panic on the context thread: %v\n%s", p, debug.Stack())
		}
	}()
	return fn()
}

// onThread reports whether the caller is the executor goroutine. A
// goroutine locked to a thread is the only one that runs on it, so the
// thread id identifies the goroutine while the executor lives.
func (e *executor) onThread() bool {
	return threadID() == e.tid
}

func (e *executor) closed() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// do runs fn on the executor; see Context.Do.
func (e *executor) do(ctx context.Context, fn func() error) error {
	// Checked first: after the executor exits, its thread id may be
	// reused by another thread.
	if e.closed() {
		return ErrClosed
	}
	if e.onThread() {
		return runRecovered(fn)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	req := &request{fn: fn, done: make(chan struct{})}
	select {
	case e.reqs <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-e.done:
		return ErrClosed
	}
	select {
	case <-req.done:
		return req.err
	case <-ctx.Done():
		if req.state.CompareAndSwap(pending, cancelled) {
			return ctx.Err()
		}
		<-req.done
		return req.err
	}
}

// close stops the executor and waits for it; see Context.Close.
func (e *executor) close() error {
	if !e.closed() && e.onThread() {
		return fmt.Errorf("%w: Close called on the context thread", ErrBadArgument)
	}
	first := false
	e.closeOnce.Do(func() {
		first = true
		close(e.quit)
		<-e.done
	})
	if first {
		return e.closeErr
	}
	return nil
}
