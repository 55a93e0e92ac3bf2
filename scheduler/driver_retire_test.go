package scheduler_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// A driven worker whose Run ended (its ctx) left the scheduler: the
// tasks queued for it went to the other worker, later tasks go there
// only, and a team larger than the workers left is refused. Under the
// random policy (no stealing) half the later tasks queued on the dead
// worker and WaitAll, then Close, hung.
func TestDriverEndedLeavesScheduler(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithDrivenWorkers(1),
		scheduler.WithPolicy("random"), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	d, err := s.Driver(1)
	require.NoError(t, err)
	// Tasks queued while the worker is driven (Init) but not running
	// any: about half are queued for worker 1.
	require.NoError(t, d.Init())
	var ran atomic.Int32
	count := &scheduler.Codelet{Name: "count", CPU: func(*scheduler.Call) error { ran.Add(1); return nil }}
	for range 100 {
		require.NoError(t, s.Submit(ctx, count))
	}
	require.NoError(t, d.Deinit())
	require.NoError(t, s.WaitAll(ctx), "the tasks queued for the ended driver ran on worker 0")
	assert.Equal(t, int32(100), ran.Load())
	assert.Nil(t, s.WorkerContext(1), "worker 1 is in no context")
	assert.Equal(t, []int{0}, s.Global().Workers())

	for range 100 {
		require.NoError(t, s.Submit(ctx, count))
	}
	require.NoError(t, s.WaitAll(ctx))
	assert.Equal(t, int32(200), ran.Load())

	err = s.Submit(ctx, clEmpty, scheduler.WithTeam(2))
	require.ErrorIs(t, err, scheduler.ErrBadTeam)
	assert.ErrorContains(t, err, "1 CPU worker left: driven worker 1 left the scheduler when its driver ended")
	c, err := s.NewContext("c", scheduler.ContextWorkers(1))
	require.ErrorIs(t, err, scheduler.ErrBadWorker)
	assert.ErrorContains(t, err, "worker 1 left the scheduler")
	assert.Nil(t, c)
	require.NoError(t, closeBefore(t, ctx, s, "after a driver ended"))
}

// The same with Run ended by its ctx, the trial's runcancel: tasks
// submitted meanwhile and after all run.
func TestDriverRunEndedTasksRun(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithDrivenWorkers(1),
		scheduler.WithPolicy("random"), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	d, err := s.Driver(1)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, d.Run(runCtx), context.Canceled)
	for range 200 {
		require.NoError(t, s.Submit(ctx, clEmpty))
	}
	require.NoError(t, s.WaitAll(ctx))
	require.NoError(t, closeBefore(t, ctx, s, "after Run ended"))
}

// Every worker driven, every driver ended: a submission fails, naming
// the worker, and the tasks queued for no one are canceled then (not
// only at Close: TestLastDriverEndedWaitAllReturns), so WaitAll returns
// their cancellations instead of waiting for them forever.
func TestDriverEndedNoWorkerLeft(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithDrivenWorkers(1), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	d, err := s.Driver(0)
	require.NoError(t, err)
	require.NoError(t, d.Init())
	for range 5 {
		require.NoError(t, s.Submit(ctx, clEmpty))
	}
	require.NoError(t, d.Deinit())
	err = s.Submit(ctx, clEmpty)
	require.ErrorIs(t, err, scheduler.ErrDriver)
	assert.ErrorContains(t, err, "no worker is left to run it: driven worker 0 left the scheduler")
	err = s.WaitAll(ctx)
	require.ErrorIs(t, err, scheduler.ErrCanceled)
	assert.ErrorContains(t, err, "5 tasks not run")
	assert.ErrorContains(t, err, "canceled when the last worker left the scheduler")
	assert.ErrorContains(t, err, "no worker is left to run it")
	assert.ErrorContains(t, err, "worker 0 was driven by the application (WithDrivenWorkers) and its driver ended")
	require.NoError(t, closeBefore(t, ctx, s, "every driver ended with tasks queued"), "reported by WaitAll")
}

// A driven worker whose Driver was taken and never run: WaitAll says so
// (it said only "N tasks pending"), and Close ends: it goes on without
// the worker, whose tasks go to the other worker, and cancels the team
// that cannot form without it, naming it. Its Init fails then, and Run
// returns nil.
func TestDriverNeverRunCloseEnds(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithDrivenWorkers(1), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	d, err := s.Driver(1)
	require.NoError(t, err)
	var ran atomic.Int32
	count := &scheduler.Codelet{Name: "count", CPU: func(*scheduler.Call) error { ran.Add(1); return nil }}
	team := &scheduler.Codelet{Name: "team", Parallel: scheduler.SPMD, CPU: func(*scheduler.Call) error { return nil }}
	require.NoError(t, s.Submit(ctx, team, scheduler.WithTeam(2)))
	for range 20 {
		require.NoError(t, s.Submit(ctx, count))
	}
	err = waitAllSays(t, ctx, s, "worker 1 is driven by the application (WithDrivenWorkers) and has not run (call its Driver's Run or RunOnce)")
	require.ErrorIs(t, err, scheduler.ErrDriver)
	err = closeBefore(t, ctx, s, "a driven worker never driven")
	require.ErrorIs(t, err, scheduler.ErrCanceled)
	assert.ErrorContains(t, err, `task "team" canceled at Close`)
	assert.ErrorContains(t, err, "worker 1 is driven by the application (WithDrivenWorkers) and had not run when Close went on without it")
	assert.Equal(t, int32(20), ran.Load(), "the worker's other tasks ran on worker 0")
	require.ErrorIs(t, d.Init(), scheduler.ErrClosed)
	require.NoError(t, d.Run(ctx))
}
