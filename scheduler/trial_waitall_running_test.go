package scheduler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestWaitAllDeadlineNamesRunningTasks checks that, with the watchdog
// on, WaitAll's error on a context that ended names the task a worker
// runs, which the pending tasks wait for; the watchdog's own timeout is
// far off, so nothing is reported meanwhile.
func TestWaitAllDeadlineNamesRunningTasks(t *testing.T) {
	ctx := context.Background()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithWatchdog(time.Hour, func(scheduler.Stall) {}))
	require.NoError(t, err)
	x := []float64{0}
	h, err := s.RegisterVector(x, scheduler.Named("x"))
	require.NoError(t, err)
	gate, started := make(chan struct{}), make(chan struct{})
	block := &scheduler.Codelet{Name: "block", CPU: func(*scheduler.Call) error { close(started); <-gate; return nil }}
	next := &scheduler.Codelet{Name: "next", CPU: func(*scheduler.Call) error { return nil }}
	require.NoError(t, s.Submit(ctx, block, scheduler.RW(h)))
	require.NoError(t, s.Submit(ctx, next, scheduler.RW(h)))
	<-started
	ended, cancel := context.WithCancel(ctx)
	cancel()
	err = s.WaitAll(ended)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.Canceled), "%v", err)
	assert.Contains(t, err.Error(), "2 tasks pending")
	assert.Contains(t, err.Error(), `scheduler: running: worker 0 (cpu) "block" for `)
	close(gate)
	require.NoError(t, s.WaitAll(ctx))
	require.NoError(t, s.Close())
}
