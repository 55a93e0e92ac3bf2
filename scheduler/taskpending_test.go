package scheduler_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestSynchronousSubmitTaskPending: a Synchronous Submit whose context
// ends while its task runs returns at once with an error wrapping the
// context's and ErrTaskPending; the task runs on and its callback runs
// once, when it ends. A Submit refused (its context ended before, or a
// bad access) and a task that failed do not wrap ErrTaskPending: a
// layer above (scheduler/dist) counts the task done on such an error,
// and must not for a task still running. Task.Wait says the same.
func TestSynchronousSubmitTaskPending(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1))
	var calls atomic.Int32
	onDone := scheduler.OnDone(func(error) { calls.Add(1) })

	t.Run("context ends while the task runs", func(t *testing.T) {
		calls.Store(0)
		started, release := make(chan struct{}), make(chan struct{})
		block := &scheduler.Codelet{Name: "block", CPU: func(*scheduler.Call) error {
			close(started)
			<-release
			return nil
		}}
		sctx, cancel := context.WithCancel(ctx)
		go func() {
			<-started
			cancel()
		}()
		err := s.Submit(sctx, block, scheduler.Synchronous(), onDone)
		require.ErrorIs(t, err, scheduler.ErrTaskPending)
		require.ErrorIs(t, err, context.Canceled)
		assert.Contains(t, err.Error(), `"block"`)
		assert.Zero(t, calls.Load(), "the callback ran before the task ended")
		close(release)
		require.NoError(t, s.WaitAll(ctx))
		assert.EqualValues(t, 1, calls.Load(), "callback runs once the task ends")
	})

	t.Run("refused, context ended before", func(t *testing.T) {
		calls.Store(0)
		noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
		ended, cancel := context.WithCancel(ctx)
		cancel()
		err := s.Submit(ended, noop, scheduler.Synchronous(), onDone)
		require.ErrorIs(t, err, context.Canceled)
		assert.NotErrorIs(t, err, scheduler.ErrTaskPending)
		require.NoError(t, s.WaitAll(ctx))
		assert.Zero(t, calls.Load(), "a refused task's callback ran")
	})

	t.Run("refused, bad access", func(t *testing.T) {
		noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
		err := s.Submit(ctx, noop, scheduler.Synchronous(), scheduler.RW(nil))
		require.ErrorIs(t, err, scheduler.ErrBadData)
		assert.NotErrorIs(t, err, scheduler.ErrTaskPending)
	})

	t.Run("task failed", func(t *testing.T) {
		calls.Store(0)
		boom := errors.New("boom")
		fail := &scheduler.Codelet{Name: "fail", CPU: func(*scheduler.Call) error { return boom }}
		err := s.Submit(ctx, fail, scheduler.Synchronous(), onDone)
		require.ErrorIs(t, err, boom)
		assert.NotErrorIs(t, err, scheduler.ErrTaskPending)
		assert.EqualValues(t, 1, calls.Load(), "the callback ran before Submit returned")
		require.ErrorIs(t, s.WaitAll(ctx), boom)
	})

	t.Run("Task.Wait", func(t *testing.T) {
		release := holdWorker(ctx, t, s)
		task := scheduler.NewTask(&scheduler.Codelet{Name: "queued", CPU: func(*scheduler.Call) error { return nil }})
		require.NoError(t, s.SubmitTask(ctx, task))
		ended, cancel := context.WithCancel(ctx)
		cancel()
		err := task.Wait(ended)
		require.ErrorIs(t, err, scheduler.ErrTaskPending)
		require.ErrorIs(t, err, context.Canceled)
		release()
		require.NoError(t, task.Wait(ctx))
	})
}
