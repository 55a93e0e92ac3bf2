package cuda

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// A Context is one device's primary CUDA context, made current on one
// dedicated OS thread that runs every call made through it.
//
// CUDA keeps the current context per OS thread, while Go moves goroutines
// between threads at will: a goroutine that makes the context current and
// then allocates may find itself on another thread and get
// CUDA_ERROR_INVALID_CONTEXT. A Context therefore owns a goroutine locked
// to its thread (runtime.LockOSThread) with the context current, and Do
// funnels work to it. The methods of Context, Stream, Event and Module all
// go through Do and are safe for concurrent use; concurrent calls run one
// at a time, in the order the executor receives them.
//
// Calls made from inside a Do function (which already runs on the
// executor) run inline, so Context methods may be used there freely.
type Context struct {
	d       *Driver
	ordinal int
	dev     int32
	handle  uintptr // the CUcontext
	tid     int     // OS thread id of the executor goroutine

	reqs chan *request
	quit chan struct{}
	done chan struct{} // closed when the executor goroutine has exited

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

// NewContext retains the primary context of device ordinal and starts the
// goroutine that runs this Context's calls with it current. The caller
// must Close the Context. Creating a primary context that nobody holds yet
// takes a while (typically 0.1-0.5 s); retaining one that exists is cheap.
// If ctx is done before the context is ready, NewContext releases it and
// returns ctx.Err().
func (d *Driver) NewContext(ctx context.Context, ordinal int) (*Context, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dev, err := d.device(ordinal)
	if err != nil {
		return nil, err
	}
	c := &Context{
		d:       d,
		ordinal: ordinal,
		dev:     dev,
		reqs:    make(chan *request),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	ready := make(chan error, 1)
	go c.run(ready)
	// Retaining is bounded in time and cannot be interrupted; wait for it
	// so that the goroutine is never left behind.
	if err := <-ready; err != nil {
		<-c.done
		return nil, fmt.Errorf("cuda: device %d: %w", ordinal, err)
	}
	if err := ctx.Err(); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// run is the executor goroutine. It never unlocks its thread: when it
// returns, Go terminates the thread, so no other goroutine ever inherits a
// thread with this context current.
func (c *Context) run(ready chan<- error) {
	defer close(c.done)
	runtime.LockOSThread()
	c.tid = unix.Gettid()
	var h uintptr
	if err := c.d.check("cuDevicePrimaryCtxRetain", c.d.api.primaryCtxRetain(&h, c.dev)); err != nil {
		ready <- err
		return
	}
	if err := c.d.check("cuCtxSetCurrent", c.d.api.ctxSetCurrent(h)); err != nil {
		_ = c.d.api.primaryCtxRelease(c.dev)
		ready <- err
		return
	}
	c.handle = h
	ready <- nil
	for {
		select {
		case req := <-c.reqs:
			if req.state.CompareAndSwap(pending, started) {
				req.err = runRecovered(req.fn)
			}
			close(req.done)
		case <-c.quit:
			err := c.d.check("cuCtxSetCurrent", c.d.api.ctxSetCurrent(0))
			c.closeErr = errors.Join(err, c.d.check("cuDevicePrimaryCtxRelease_v2", c.d.api.primaryCtxRelease(c.dev)))
			return
		}
	}
}

// runRecovered runs fn and turns a panic into an error carrying the stack,
// so that a bad callback cannot kill the executor (and the process).
func runRecovered(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("cuda: panic in Do: %v\n%s", p, debug.Stack())
		}
	}()
	return fn()
}

// onExecutor reports whether the caller is the executor goroutine. A
// goroutine locked to a thread is the only one that runs on it, so the
// thread id identifies the goroutine.
func (c *Context) onExecutor() bool {
	return unix.Gettid() == c.tid
}

// Do runs fn on the Context's thread, with the context current, and
// returns its error. A panic in fn is returned as an error.
//
// If ctx is done before fn starts, fn does not run and Do returns
// ctx.Err(). Once fn has started, Do waits for it: a CUDA call cannot be
// interrupted. Calling Do from inside fn runs the inner function inline.
// fn must not wait for another goroutine that is itself calling Do on the
// same Context.
func (c *Context) Do(ctx context.Context, fn func() error) error {
	select {
	case <-c.done:
		// Checked first: after the executor exits its thread id may be
		// reused by another thread.
		return ErrClosed
	default:
	}
	if c.onExecutor() {
		return runRecovered(fn)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	req := &request{fn: fn, done: make(chan struct{})}
	select {
	case c.reqs <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
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

// Close releases the primary context and stops the executor goroutine,
// waiting for it to exit. Calls already running finish first; later calls
// return ErrClosed. When the last holder of a primary context releases it,
// the driver destroys it together with everything allocated in it. Close
// is idempotent; it returns the release error the first time and nil
// after. Calling Close from inside Do is an error.
func (c *Context) Close() error {
	if c.onExecutor() {
		return fmt.Errorf("%w: Close called from inside Do", ErrBadArgument)
	}
	first := false
	c.closeOnce.Do(func() {
		first = true
		close(c.quit)
		<-c.done
	})
	if first {
		return c.closeErr
	}
	return nil
}

// Ordinal returns the device ordinal of the Context.
func (c *Context) Ordinal() int { return c.ordinal }

// Driver returns the driver the Context belongs to.
func (c *Context) Driver() *Driver { return c.d }

// call runs one driver call on the executor and converts its result.
func (c *Context) call(ctx context.Context, name string, f func() Result) error {
	return c.Do(ctx, func() error { return c.d.check(name, f()) })
}

// Synchronize waits until the device has finished all work submitted in
// this context (cuCtxSynchronize). It blocks the executor meanwhile; to
// wait for one stream without blocking other calls use
// Stream.Synchronize.
func (c *Context) Synchronize(ctx context.Context) error {
	return c.call(ctx, "cuCtxSynchronize", c.d.api.ctxSynchronize)
}

// MemInfo returns the free and total device memory in bytes
// (cuMemGetInfo_v2).
func (c *Context) MemInfo(ctx context.Context) (free, total uint64, err error) {
	var f, t uintptr
	err = c.call(ctx, "cuMemGetInfo_v2", func() Result { return c.d.api.memGetInfo(&f, &t) })
	return uint64(f), uint64(t), err
}
