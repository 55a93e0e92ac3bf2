package cuda

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/ebitengine/purego"
)

// LaunchHostFunc queues fn on stream s (cuLaunchHostFunc); a nil s means
// the default stream. fn runs once all the work queued on s before it has
// completed, and the work queued on s after it starts only when fn has
// returned: a way to learn, without polling or a blocked thread, that
// the stream got somewhere (to recycle a pinned buffer, say). It returns
// once fn is queued.
//
// The driver calls fn on a thread of its own, neither the caller's nor
// the Context's, and the stream stalls while fn runs, so fn should be
// short. fn must not call CUDA: no method of this package (Do included),
// no library that calls the driver; the driver forbids it and may fail
// such calls with CUDA_ERROR_NOT_PERMITTED or deadlock. Nor may fn wait
// for anything that itself waits for the stream or the device.
//
// The returned channel, buffered, receives fn's result once it has run:
// its error, or a panic in fn as an error with the stack. If the stream
// never reaches fn (an earlier kernel failed, or the primary context was
// destroyed first), fn does not run and the channel receives nothing.
// It returns an error wrapping ErrNotSupported when the driver lacks
// cuLaunchHostFunc (CUDA 10.0).
//
// Each call costs a map entry until fn has run; the C callback that the
// driver calls is made once per process (see hostFuncs).
func (c *Context) LaunchHostFunc(ctx context.Context, fn func() error, s *Stream) (<-chan error, error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: LaunchHostFunc of a nil function", ErrBadArgument)
	}
	if c.d.api.launchHostFunc == nil {
		return nil, c.d.unsupported("cuLaunchHostFunc")
	}
	cb := hostFuncs.callback()
	key, done := hostFuncs.add(fn)
	err := c.call(ctx, "cuLaunchHostFunc", func() Result { return c.d.api.launchHostFunc(s.h(), cb, key) })
	if err != nil {
		hostFuncs.remove(key)
		return nil, err
	}
	return done, nil
}

// hostFuncs routes the driver's calls of the package's one host function
// callback to the Go functions LaunchHostFunc queued. Unlike everything
// else here it is package state, because the callback is: purego
// callbacks are a process-wide resource that is never freed (a process
// can make about 2000), so one callback, made on first use, serves every
// Driver and Context, and the userData the driver passes back to it is
// the key of the Go function in this table.
var hostFuncs hostFuncTable

// A hostFuncTable holds the queued host functions by key.
type hostFuncTable struct {
	once sync.Once
	cb   uintptr // the C function pointer of run

	mu   sync.Mutex
	next uintptr // the last key given out
	fns  map[uintptr]hostFunc
}

// A hostFunc is a queued function and the channel its result goes to.
type hostFunc struct {
	fn   func() error
	done chan error
}

// callback returns the C function pointer (CUhostFn) that runs the
// function of key userData, making it on first use.
//
// purego.NewCallback goes through the cgo callback path (crosscall2,
// runtime.cgocallback), which binds a Go M to a thread Go did not create:
// the driver's threads. This works in CGO_ENABLED=1 builds and in
// CGO_ENABLED=0 ones (purego's internal fakecgo); TestLaunchHostFunc
// checks it under both, with the stand-in driver calling from its stream
// threads.
func (t *hostFuncTable) callback() uintptr {
	t.once.Do(func() { t.cb = purego.NewCallback(t.run) })
	return t.cb
}

// add registers fn and returns its key and result channel.
func (t *hostFuncTable) add(fn func() error) (uintptr, chan error) {
	done := make(chan error, 1)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fns == nil {
		t.fns = make(map[uintptr]hostFunc)
	}
	t.next++
	t.fns[t.next] = hostFunc{fn: fn, done: done}
	return t.next, done
}

// remove forgets key, whose launch failed.
func (t *hostFuncTable) remove(key uintptr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.fns, key)
}

// run is the callback: it runs the function of key, at most once, on
// the driver's thread, and sends its result.
func (t *hostFuncTable) run(key uintptr) {
	t.mu.Lock()
	h, ok := t.fns[key]
	delete(t.fns, key)
	t.mu.Unlock()
	if !ok {
		return
	}
	h.done <- runHostFunc(h.fn)
}

// runHostFunc runs fn, returning a panic as an error with its stack: a
// panic on a driver thread would otherwise end the process.
func runHostFunc(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("cuda: panic in a host function: %v\n%s", p, debug.Stack())
		}
	}()
	return fn()
}
