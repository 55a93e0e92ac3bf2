package scheduler_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestDriverRunOnce: an application loop drives a worker with RunOnce
// beside a worker the scheduler runs; every task runs, some on each.
func TestDriverRunOnce(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithDrivenWorkers(1),
		scheduler.WithPolicy("eager"), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	d, err := s.Driver(1)
	require.NoError(t, err)
	assert.Equal(t, 1, d.Worker())
	assert.False(t, d.RunOnce(), "no cycle before Init")
	require.NoError(t, d.Init())
	var on [2]atomic.Int64
	release := make(chan struct{})
	work := &scheduler.Codelet{Name: "work", CPU: func(c *scheduler.Call) error {
		if c.Worker == 0 {
			<-release // keep the launched worker busy: the driven one must take the rest
		}
		on[c.Worker].Add(1)
		return nil
	}}
	const n = 50
	for range n {
		require.NoError(t, s.Submit(ctx, work))
	}
	for on[1].Load() < n-1 {
		d.RunOnce()
		if ctx.Err() != nil {
			t.Fatal("the driven worker did not run its tasks")
		}
	}
	close(release)
	require.NoError(t, s.WaitAll(ctx))
	assert.Equal(t, int64(n), on[0].Load()+on[1].Load())
	assert.GreaterOrEqual(t, on[1].Load(), int64(n-1))
	require.NoError(t, s.Close())
	assert.False(t, d.RunOnce(), "no cycle after Close")
	require.NoError(t, d.Deinit())
	require.ErrorIs(t, d.Deinit(), scheduler.ErrDriver)
}

// TestDriverRunCanceled: Run returns ctx's error when ctx ends first,
// and the scheduler still closes.
func TestDriverRunCanceled(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithDrivenWorkers(1), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	d, err := s.Driver(1)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.NoError(t, s.Close())
}

// TestDriverBadUse feeds every misuse of drivers.
func TestDriverBadUse(t *testing.T) {
	ctx := testCtx(t)
	_, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithDrivenWorkers(3))
	require.ErrorIs(t, err, scheduler.ErrBadOption)
	_, err = scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithDrivenWorkers(-1))
	require.ErrorIs(t, err, scheduler.ErrBadOption)

	s := newSched(t, scheduler.WithWorkers(2), scheduler.WithDrivenWorkers(1))
	_, err = s.Driver(0)
	require.ErrorIs(t, err, scheduler.ErrDriver, "a worker the scheduler runs")
	assert.Contains(t, err.Error(), "WithDrivenWorkers")
	_, err = s.Driver(2)
	require.ErrorIs(t, err, scheduler.ErrBadWorker)
	d, err := s.Driver(1)
	require.NoError(t, err)
	_, err = s.Driver(1)
	require.ErrorIs(t, err, scheduler.ErrDriver, "taken twice")
	require.ErrorIs(t, d.Deinit(), scheduler.ErrDriver, "Deinit before Init")
	require.NoError(t, d.Init())
	require.ErrorIs(t, d.Init(), scheduler.ErrDriver, "Init twice")
	require.ErrorIs(t, d.Run(ctx), scheduler.ErrDriver, "Run after Init")
	require.NoError(t, d.Deinit())
}
