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

// A task submitted with CancelOn does not start once its context has
// ended: the tasks queued behind running ones (popped later) and those
// still waiting for their dependencies complete without running, with
// ErrCanceled and the context's cause; the running tasks finish, and
// WaitAll returns once they have. Tasks submitted without that context,
// queued alike, still run. Every task waits for an event (a start, a
// release), never for time to pass.
func TestCancelOnDropsUnstartedTasks(t *testing.T) {
	ctx := testCtx(t)
	const workers, queued = 2, 6
	s := newSched(t, scheduler.WithWorkers(workers))
	gctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	cause := errors.New("the graph failed")

	started := make(chan struct{}, workers+queued+2)
	release := make(chan struct{})
	var starts, others atomic.Int64
	hold := &scheduler.Codelet{Name: "hold", CPU: func(c *scheduler.Call) error {
		starts.Add(1)
		started <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	other := &scheduler.Codelet{Name: "other", CPU: func(*scheduler.Call) error { others.Add(1); return nil }}

	var x uint64
	hx, err := s.RegisterValue(&x)
	require.NoError(t, err)
	// The first task holds x; the second, on the other worker, holds
	// nothing: both workers are busy until released.
	require.NoError(t, s.Submit(ctx, hold, scheduler.RW(hx), scheduler.CancelOn(gctx)))
	require.NoError(t, s.Submit(ctx, hold, scheduler.CancelOn(gctx)))
	for i := range workers {
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatalf("only %d of the %d held tasks started", i, workers)
		}
	}
	// Queued behind them: ready tasks in the policy's queues, and one
	// that waits for the first held task (a dependency).
	for range queued {
		require.NoError(t, s.Submit(ctx, hold, scheduler.CancelOn(gctx)))
	}
	dep := scheduler.NewTask(hold, scheduler.RW(hx), scheduler.CancelOn(gctx))
	require.NoError(t, s.SubmitTask(ctx, dep))
	require.NoError(t, s.Submit(ctx, other))

	cancel(cause)
	// Submitted after the end: canceled at once.
	late := scheduler.NewTask(hold, scheduler.CancelOn(gctx))
	require.NoError(t, s.SubmitTask(ctx, late))
	require.ErrorIs(t, late.Wait(ctx), scheduler.ErrCanceled)
	close(release)

	err = s.WaitAll(ctx)
	require.ErrorIs(t, err, scheduler.ErrCanceled)
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "WaitAll ended by its deadline")
	assert.Contains(t, err.Error(), "8 tasks not run", "the queued tasks, the dependent and the late one")
	assert.Contains(t, err.Error(), "canceled before it started: the graph failed")
	assert.Equal(t, int64(workers), starts.Load(), "only the tasks running when the context ended ran")
	assert.Equal(t, int64(1), others.Load(), "a task without the context ran")
	require.ErrorIs(t, dep.Err(), scheduler.ErrCanceled)
	require.ErrorIs(t, dep.Err(), cause)

	// The scheduler goes on: a task with an ended context is canceled,
	// others run.
	require.NoError(t, s.Submit(ctx, other))
	require.NoError(t, s.WaitAll(ctx))
	assert.Equal(t, int64(2), others.Load())
}

// A task canceled because a task it depends on was canceled by its
// CancelOn context names that task; it used to read as if its own
// context had ended ("canceled before it started"), though it had none.
func TestCancelOnDependentNamesTheCanceledTask(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	h, err := s.RegisterVector(make([]float64, 1))
	require.NoError(t, err)
	gate := make(chan struct{})
	hold := &scheduler.Codelet{Name: "hold", CPU: func(*scheduler.Call) error { <-gate; return nil }}
	step := &scheduler.Codelet{Name: "step", CPU: func(*scheduler.Call) error { return nil }}
	reader := &scheduler.Codelet{Name: "reader", CPU: func(*scheduler.Call) error { return nil }}
	after := &scheduler.Codelet{Name: "after", CPU: func(*scheduler.Call) error { return nil }}
	cctx, cancel := context.WithCancelCause(ctx)
	require.NoError(t, s.Submit(ctx, hold, scheduler.RW(h)))
	st := scheduler.NewTask(step, scheduler.RW(h), scheduler.CancelOn(cctx))
	require.NoError(t, s.SubmitTask(ctx, st))
	rd := scheduler.NewTask(reader, scheduler.R(h))
	require.NoError(t, s.SubmitTask(ctx, rd))
	af := scheduler.NewTask(after, scheduler.After(rd))
	require.NoError(t, s.SubmitTask(ctx, af))
	stop := errors.New("user stop")
	cancel(stop)
	close(gate)
	require.Error(t, s.WaitAll(ctx))
	assert.Equal(t, `scheduler: task "step" canceled before it started: user stop`, st.Err().Error())
	for _, x := range []*scheduler.Task{rd, af} {
		require.ErrorIs(t, x.Err(), scheduler.ErrCanceled)
		require.ErrorIs(t, x.Err(), stop)
		assert.Contains(t, x.Err().Error(), `task "step", which it depends on, was canceled before it started: user stop`)
	}
}
