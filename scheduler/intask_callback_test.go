package scheduler_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestWaitInCallbackOrTeamRefused: a task's callback runs on its worker
// before the task is done, and a team task's code runs outside the
// worker's usual call: a wait from either is refused with ErrInTask as a
// task's is (WaitAll waited for its own task for ever), and a callback's
// Data of its task's handle returns without waiting for that task (it
// hung for ever, and Close with it).
func TestWaitInCallbackOrTeamRefused(t *testing.T) {
	ctx := context.Background()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	defer s.Close()

	got := make(chan error, 2)
	team := &scheduler.Codelet{Name: "team", Parallel: scheduler.ForkJoin, CPU: func(*scheduler.Call) error {
		got <- s.WaitAll(ctx)
		return nil
	}}
	require.NoError(t, s.Submit(ctx, team, scheduler.WithTeam(2)))
	err = <-got
	require.ErrorIs(t, err, scheduler.ErrInTask, "WaitAll from a team task")
	assert.Contains(t, err.Error(), "WaitAll called by a task's callback or a team task's code on worker")

	noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
	require.NoError(t, s.Submit(ctx, noop, scheduler.WithCallback(func(*scheduler.Task) { got <- s.WaitAll(ctx) })))
	require.ErrorIs(t, <-got, scheduler.ErrInTask, "WaitAll from a callback")

	var x int64
	h, err := s.RegisterValue(&x)
	require.NoError(t, err)
	set := &scheduler.Codelet{Name: "set", CPU: func(c *scheduler.Call) error { *scheduler.ValueOf[*int64](c, 0) = 5; return nil }}
	seen := make(chan int64, 1)
	require.NoError(t, s.Submit(ctx, set, scheduler.RW(h), scheduler.WithCallback(func(*scheduler.Task) {
		seen <- *h.Data().(*int64)
	})))
	assert.Equal(t, int64(5), <-seen, "the callback's Data returns, with its task's result")
	require.NoError(t, s.WaitAll(ctx))
}
