package cuda

import (
	"context"
	"errors"
	"fmt"
)

// A Context is one device's primary CUDA context, or a green context on
// a share of its SMs (Driver.NewGreenContext), made current on one
// dedicated OS thread that runs every call made through it.
//
// CUDA keeps the current context per OS thread, while Go moves goroutines
// between threads at will: a goroutine that makes the context current and
// then allocates may find itself on another thread and get
// CUDA_ERROR_INVALID_CONTEXT. A Context therefore owns a goroutine locked
// to its thread (runtime.LockOSThread) with the context current, and Do
// funnels work to it. The methods of Context, Stream, Event and Module all
// go through Do and are safe for concurrent use; concurrent calls run one
// at a time, in the order the executor receives them. Each costs a
// channel round trip to the thread (a few microseconds); batch many driver
// calls into one Do where that matters.
//
// Calls made from inside a Do function (which already runs on the
// context's thread) run inline, so Context methods may be used there
// freely.
type Context struct {
	d       *Driver
	ordinal int
	dev     int32
	handle  uintptr // the CUcontext
	green   uintptr // the CUgreenCtx of a green Context, else 0
	ex      *executor
}

// NewContext retains the primary context of device ordinal and starts the
// goroutine that runs this Context's calls with it current. The caller
// must Close the Context. Creating a primary context that nobody holds yet
// takes a while (typically 0.1-0.5 s) and cannot be interrupted;
// retaining one that exists is cheap. If ctx is done by the time the
// context is ready, NewContext releases it and returns ctx.Err().
func (d *Driver) NewContext(ctx context.Context, ordinal int) (*Context, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dev, err := d.device(ordinal)
	if err != nil {
		return nil, err
	}
	c := &Context{d: d, ordinal: ordinal, dev: dev}
	setup := func() error {
		var h uintptr
		if err := d.check("cuDevicePrimaryCtxRetain", d.api.primaryCtxRetain(&h, dev)); err != nil {
			return err
		}
		if err := d.check("cuCtxSetCurrent", d.api.ctxSetCurrent(h)); err != nil {
			_ = d.api.primaryCtxRelease(dev)
			return err
		}
		c.handle = h
		return nil
	}
	teardown := func() error {
		err := d.check("cuCtxSetCurrent", d.api.ctxSetCurrent(0))
		return errors.Join(err, d.check("cuDevicePrimaryCtxRelease_v2", d.api.primaryCtxRelease(dev)))
	}
	c.ex, err = startExecutor(setup, teardown)
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: %w", ordinal, err)
	}
	if err := ctx.Err(); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// Do runs fn on the Context's thread, with the context current, and
// returns its error. A panic in fn is returned as an error with its
// stack. Use it to call other libraries bound with purego (cuBLAS, say)
// that need the context current, or to batch several calls into one trip.
//
// If ctx is done before fn starts, fn does not run and Do returns
// ctx.Err(). Once fn has started, Do waits for it: a CUDA call cannot be
// interrupted. Calling Do from inside fn runs the inner function inline.
// fn must not wait for another goroutine that is itself calling Do on the
// same Context. After Close, Do returns ErrClosed.
func (c *Context) Do(ctx context.Context, fn func() error) error {
	return c.ex.do(ctx, fn)
}

// Close releases the primary context and stops the context's goroutine,
// waiting for it to exit. A call already running finishes first; later
// calls return ErrClosed. When the last holder of a primary context
// releases it, the driver destroys it with everything allocated in it.
// Closing a green Context destroys its green context instead (see
// NewGreenContext). Close is idempotent: it returns the release error the
// first time and nil after. Calling Close from inside Do is an error.
func (c *Context) Close() error {
	return c.ex.close()
}

// Ordinal returns the device ordinal of the Context.
func (c *Context) Ordinal() int { return c.ordinal }

// Driver returns the driver the Context belongs to.
func (c *Context) Driver() *Driver { return c.d }

// call runs one driver call on the context's thread and converts its
// result.
func (c *Context) call(ctx context.Context, name string, f func() Result) error {
	return c.Do(ctx, func() error { return c.d.check(name, f()) })
}

// Synchronize waits until the device has finished all work submitted in
// this context (cuCtxSynchronize). It occupies the context's thread
// meanwhile; to wait for one stream without blocking other calls use
// Stream.Synchronize with a cancellable ctx.
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
