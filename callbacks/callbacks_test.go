package callbacks_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/callbacks"
	"github.com/pzgo/pz/comm"
)

func TestLIFOOrder(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			var s callbacks.Stack // the zero value is usable
			var order []int
			for i := range n {
				require.NoError(t, s.Push(func() error { order = append(order, i); return nil }))
			}
			assert.Equal(t, n, s.Len())
			require.NoError(t, s.Close())
			want := make([]int, n)
			for i := range want {
				want[i] = n - 1 - i
			}
			if n == 0 {
				want = nil
			}
			assert.Equal(t, want, order)
			assert.Equal(t, 0, s.Len())
			assert.True(t, s.Closed())
		})
	}
}

func TestExactlyOnceUnderErrorsAndPanics(t *testing.T) {
	s := callbacks.New()
	const n = 6
	var calls [n]int
	var order []int
	errBoom := errors.New("boom")
	errPanicValue := errors.New("panic value")
	for i := range n {
		require.NoError(t, s.Push(func() error {
			calls[i]++
			order = append(order, i)
			switch i {
			case 1:
				return errBoom
			case 2:
				panic("string panic")
			case 4:
				panic(errPanicValue)
			}
			return nil
		}))
	}
	err := s.Close()
	require.Error(t, err)
	for i, c := range calls {
		assert.Equal(t, 1, c, "callback %d", i)
	}
	assert.Equal(t, []int{5, 4, 3, 2, 1, 0}, order)

	assert.ErrorIs(t, err, errBoom)
	assert.ErrorIs(t, err, errPanicValue, "a panic with an error value unwraps to it")
	var pe *comm.PanicError
	require.ErrorAs(t, err, &pe)
	// The first PanicError in run order is callback 4's.
	assert.Equal(t, errPanicValue, pe.Value)
	assert.Contains(t, string(pe.Stack), "callbacks_test.go", "the stack names the panicking callback")

	// Errors are joined in run order and name the push index.
	joined, ok := err.(interface{ Unwrap() []error })
	require.True(t, ok, "Close returns an errors.Join error")
	parts := joined.Unwrap()
	require.Len(t, parts, 3)
	assert.True(t, strings.HasPrefix(parts[0].Error(), "callbacks: callback 4: panic: panic value"), parts[0].Error())
	assert.True(t, strings.HasPrefix(parts[1].Error(), "callbacks: callback 2: panic: string panic"), parts[1].Error())
	assert.Equal(t, "callbacks: callback 1: boom", parts[2].Error())
	var spe *comm.PanicError
	require.ErrorAs(t, parts[1], &spe)
	assert.Equal(t, "string panic", spe.Value)
	assert.NoError(t, spe.Unwrap(), "a non-error panic value unwraps to nil")

	// Idempotent: a second Close runs nothing and returns the same error.
	assert.Same(t, err, s.Close())
	for i, c := range calls {
		assert.Equal(t, 1, c, "callback %d after second Close", i)
	}
}

func TestPushAfterClose(t *testing.T) {
	s := callbacks.New()
	require.NoError(t, s.Close())
	ran := false
	err := s.Push(func() error { ran = true; return nil })
	assert.ErrorIs(t, err, callbacks.ErrClosed)
	assert.NoError(t, s.Close())
	assert.False(t, ran)
	assert.Equal(t, 0, s.Len())
}

func TestPushFromCallbackIsRefused(t *testing.T) {
	s := callbacks.New()
	var pushErr error
	innerRan := false
	require.NoError(t, s.Push(func() error {
		pushErr = s.Push(func() error { innerRan = true; return nil })
		return nil
	}))
	require.NoError(t, s.Close())
	assert.ErrorIs(t, pushErr, callbacks.ErrClosed)
	assert.False(t, innerRan)
}

// TestCloseFromCallback: a callback calling Close on its own stack gets
// ErrCloseInCallback at once instead of waiting for itself; the Close
// running it goes on with the callbacks below, and a Close after the
// first one ended returns its result, on the same goroutine too.
func TestCloseFromCallback(t *testing.T) {
	s := callbacks.New()
	var order []string
	require.NoError(t, s.Push(func() error { order = append(order, "first"); return nil }))
	require.NoError(t, s.Push(func() error {
		order = append(order, "closer")
		return s.Close() // returned, so that the first Close reports it
	}))
	err := s.Close()
	require.ErrorIs(t, err, callbacks.ErrCloseInCallback)
	assert.ErrorContains(t, err, "callback 1")
	assert.Equal(t, []string{"closer", "first"}, order)
	assert.Same(t, err, s.Close(), "later calls return the first result")
}

func TestPushNil(t *testing.T) {
	s := callbacks.New()
	assert.ErrorIs(t, s.Push(nil), callbacks.ErrNilFunc)
	assert.Equal(t, 0, s.Len())
}

// Found in the new-user trial: a nil finalizer (an unset func field) and
// one stacked by a callback that Close was running were refused with
// only "callbacks: nil callback" and "callbacks: stack closed", naming
// neither which Push nor what to do.
func TestPushErrorsSayWhichAndTheFix(t *testing.T) {
	s := callbacks.New()
	require.NoError(t, s.Push(func() error { return nil }))
	err := s.Push(nil)
	require.ErrorIs(t, err, callbacks.ErrNilFunc)
	assert.ErrorContains(t, err, "Push (callback 1) was given a nil func")
	assert.ErrorContains(t, err, "pass the function Close should run")
	err = s.PushNamed("solver", nil)
	require.ErrorIs(t, err, callbacks.ErrNilFunc)
	assert.ErrorContains(t, err, `PushNamed("solver") was given a nil func`)

	var late error
	require.NoError(t, s.Push(func() error { late = s.Push(func() error { return nil }); return nil }))
	require.NoError(t, s.Close())
	require.ErrorIs(t, late, callbacks.ErrClosed)
	assert.ErrorContains(t, late, "Push (callback 2) came after Close began, so the callback was not stacked and will never run")
	assert.ErrorContains(t, late, "stack finalizers before Close")
}

func TestConcurrentClose(t *testing.T) {
	s := callbacks.New()
	var count atomic.Int32
	release := make(chan struct{})
	errSlow := errors.New("slow")
	require.NoError(t, s.Push(func() error {
		count.Add(1)
		<-release // hold the first Close so that the others must wait
		return errSlow
	}))
	const closers = 8
	errs := make([]error, closers)
	var wg sync.WaitGroup
	for i := range closers {
		wg.Go(func() { errs[i] = s.Close() })
	}
	close(release)
	wg.Wait()
	assert.Equal(t, int32(1), count.Load())
	for i, err := range errs {
		assert.ErrorIs(t, err, errSlow, "closer %d", i)
		assert.Same(t, errs[0], err, "closer %d gets the first Close's error", i)
	}
}

// TestConcurrentPushAndClose checks that each Push either stacks its
// callback, which then runs exactly once, or returns ErrClosed and never
// runs it.
func TestConcurrentPushAndClose(t *testing.T) {
	s := callbacks.New()
	const pushers = 16
	var ran [pushers]atomic.Int32
	accepted := make([]bool, pushers)
	var wg sync.WaitGroup
	for i := range pushers {
		wg.Go(func() {
			err := s.Push(func() error { ran[i].Add(1); return nil })
			if err == nil {
				accepted[i] = true
			} else if !errors.Is(err, callbacks.ErrClosed) {
				t.Errorf("pusher %d: %v", i, err)
			}
		})
	}
	wg.Go(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	wg.Wait()
	require.NoError(t, s.Close()) // waits for the first Close, if it was last
	for i := range pushers {
		want := int32(0)
		if accepted[i] {
			want = 1
		}
		assert.Equal(t, want, ran[i].Load(), "pusher %d accepted=%v", i, accepted[i])
	}
}

func TestGoexitInCallback(t *testing.T) {
	s := callbacks.New()
	var order []int
	for i := range 3 {
		require.NoError(t, s.Push(func() error {
			order = append(order, i)
			if i == 1 {
				// What testing.T.FailNow does inside a callback.
				runtime.Goexit()
			}
			return nil
		}))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Close() // this goroutine exits inside Close
	}()
	<-done
	// Close from another goroutine must not hang and must see the Goexit.
	err := s.Close()
	assert.ErrorIs(t, err, callbacks.ErrGoexit)
	assert.Contains(t, err.Error(), "callback 1")
	assert.Equal(t, []int{2, 1, 0}, order, "the callback below the Goexit still runs")
}

// A named callback does not take a number: the others are numbered by
// their push order among Push's, and errors call the named one by name.
func TestPushNamed(t *testing.T) {
	s := callbacks.New()
	require.NoError(t, s.PushNamed("logger", func() error { return errors.New("sync failed") }))
	require.NoError(t, s.Push(func() error { return errors.New("io") }))
	require.NoError(t, s.PushNamed("scheduler", func() error { return nil }))
	require.NoError(t, s.Push(func() error { return errors.New("solver") }))
	require.ErrorIs(t, s.PushNamed("", func() error { return nil }), callbacks.ErrNilFunc)
	require.ErrorIs(t, s.PushNamed("x", nil), callbacks.ErrNilFunc)
	err := s.Close()
	require.Error(t, err)
	assert.Equal(t, "callbacks: callback 1: solver\ncallbacks: callback 0: io\ncallbacks: logger: sync failed", err.Error())
}
