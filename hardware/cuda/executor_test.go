package cuda

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The executor is what makes CUDA's per-thread current context work from
// Go; these tests check its threading contract without a GPU.

const testTimeout = 10 * time.Second

func newTestExecutor(t *testing.T, teardown func() error) *executor {
	t.Helper()
	if teardown == nil {
		teardown = func() error { return nil }
	}
	e, err := startExecutor(func() error { return nil }, teardown)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.close() })
	return e
}

func TestExecutorRunsEverythingOnOneThread(t *testing.T) {
	e := newTestExecutor(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var mu sync.Mutex
	tids := map[int]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				err := e.do(ctx, func() error {
					mu.Lock()
					tids[threadID()]++
					mu.Unlock()
					return nil
				})
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	require.Len(t, tids, 1, "all calls on one OS thread")
	for tid, n := range tids {
		assert.Equal(t, e.tid, tid)
		assert.Equal(t, 400, n)
	}
	assert.NotEqual(t, e.tid, threadID(), "the test goroutine is not the executor")
}

func TestExecutorThreadState(t *testing.T) {
	// Thread-local state set by setup (as cuCtxSetCurrent sets CUDA's) is
	// seen by every call: here the thread's own id stands for it.
	var setupTID atomic.Int64
	e, err := startExecutor(func() error { setupTID.Store(int64(threadID())); return nil }, func() error { return nil })
	require.NoError(t, err)
	defer e.close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for range 20 {
		runtimeGosched()
		require.NoError(t, e.do(ctx, func() error {
			if int64(threadID()) != setupTID.Load() {
				return errors.New("moved to another thread")
			}
			return nil
		}))
	}
}

func TestExecutorNestedCallsRunInline(t *testing.T) {
	e := newTestExecutor(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	depth := 0
	err := e.do(ctx, func() error {
		depth++
		return e.do(ctx, func() error {
			depth++
			return e.do(ctx, func() error { depth++; return nil })
		})
	})
	require.NoError(t, err)
	assert.Equal(t, 3, depth)
}

func TestExecutorErrorsAndPanics(t *testing.T) {
	e := newTestExecutor(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	sentinel := errors.New("boom")
	require.ErrorIs(t, e.do(ctx, func() error { return sentinel }), sentinel)

	err := e.do(ctx, func() error { panic("kaboom") })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kaboom")
	assert.Contains(t, err.Error(), "executor_test.go", "the panic carries its stack")
	// The executor survives the panic.
	require.NoError(t, e.do(ctx, func() error { return nil }))
}

func TestExecutorCancellation(t *testing.T) {
	e := newTestExecutor(t, nil)
	bg, cancelBG := context.WithTimeout(context.Background(), testTimeout)
	defer cancelBG()

	// Already cancelled: fn never runs.
	ctx, cancel := context.WithCancel(bg)
	cancel()
	ran := false
	require.ErrorIs(t, e.do(ctx, func() error { ran = true; return nil }), context.Canceled)
	assert.False(t, ran)

	// Cancelled while waiting behind a long call: the waiting fn is
	// skipped; the running one completes and its result is returned.
	release := make(chan struct{})
	started := make(chan struct{})
	firstDone := make(chan error, 1)
	go func() {
		firstDone <- e.do(bg, func() error {
			close(started)
			select {
			case <-release:
			case <-bg.Done():
			}
			return nil
		})
	}()
	select {
	case <-started:
	case <-bg.Done():
		t.Fatal("first call never started")
	}
	ctx2, cancel2 := context.WithTimeout(bg, 20*time.Millisecond)
	defer cancel2()
	var secondRan atomic.Bool
	err := e.do(ctx2, func() error { secondRan.Store(true); return nil })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	close(release)
	select {
	case err := <-firstDone:
		require.NoError(t, err)
	case <-bg.Done():
		t.Fatal("first call never finished")
	}
	require.NoError(t, e.do(bg, func() error { return nil }))
	assert.False(t, secondRan.Load(), "a cancelled call does not run later")

	// Cancelled while running: Do waits for it and returns its result.
	ctx3, cancel3 := context.WithCancel(bg)
	err = e.do(ctx3, func() error {
		cancel3()
		time.Sleep(5 * time.Millisecond)
		return nil
	})
	require.NoError(t, err, "a started call completes")
}

func TestExecutorClose(t *testing.T) {
	var teardowns atomic.Int32
	var teardownTID atomic.Int64
	e, err := startExecutor(func() error { return nil }, func() error {
		teardowns.Add(1)
		teardownTID.Store(int64(threadID()))
		return errors.New("release failed")
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	// Close from inside a call is refused (it would deadlock).
	require.ErrorIs(t, e.do(ctx, e.close), ErrBadArgument)

	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- e.close() })
	}
	wg.Wait()
	close(errs)
	var nonNil int
	for err := range errs {
		if err != nil {
			nonNil++
			assert.EqualError(t, err, "release failed")
		}
	}
	assert.Equal(t, 1, nonNil, "the first Close reports the teardown error")
	assert.Equal(t, int32(1), teardowns.Load())
	assert.Equal(t, int64(e.tid), teardownTID.Load(), "teardown ran on the executor thread")
	require.ErrorIs(t, e.do(ctx, func() error { return nil }), ErrClosed)
	require.NoError(t, e.close())
}

func TestExecutorSetupFailure(t *testing.T) {
	_, err := startExecutor(func() error { return ErrNoDriver }, func() error { return nil })
	require.ErrorIs(t, err, ErrNoDriver)
	_, err = startExecutor(func() error { panic("setup") }, func() error { return nil })
	require.ErrorContains(t, err, "setup")
}

func runtimeGosched() { time.Sleep(time.Microsecond) }

// BenchmarkExecutorDo measures the cost of funnelling one call to the
// context's thread (what every Context method pays on top of the driver),
// and of a nested call that runs inline.
func BenchmarkExecutorDo(b *testing.B) {
	e, err := startExecutor(func() error { return nil }, func() error { return nil })
	require.NoError(b, err)
	defer e.close()
	ctx := context.Background()
	noop := func() error { return nil }
	b.Run("roundtrip", func(b *testing.B) {
		for b.Loop() {
			_ = e.do(ctx, noop)
		}
	})
	b.Run("inline", func(b *testing.B) {
		_ = e.do(ctx, func() error {
			for b.Loop() {
				_ = e.do(ctx, noop)
			}
			return nil
		})
	})
}
