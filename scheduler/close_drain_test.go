package scheduler_test

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// Two contexts of one worker each, each with a team of 2 waiting: every
// worker sits in a context that lacks one, so Close found no free worker
// to lend and retried forever (the trial's closeteams). Close now serves
// one context with the other's worker, then the other with both.
func TestCloseServesStuckTeamsOneAtATime(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	var ranks atomic.Int32
	team := &scheduler.Codelet{Name: "team", Parallel: scheduler.SPMD, CPU: func(*scheduler.Call) error {
		ranks.Add(1)
		return nil
	}}
	a, err := s.NewContext("A", scheduler.ContextWorkers(0, 1))
	require.NoError(t, err)
	b, err := s.NewContext("B")
	require.NoError(t, err)
	require.NoError(t, s.Submit(ctx, team, scheduler.InContext(a), scheduler.WithTeam(2), scheduler.AfterTags(100)))
	require.NoError(t, s.MoveWorkers(a, b, 0, 1))
	require.NoError(t, s.Submit(ctx, team, scheduler.InContext(b), scheduler.WithTeam(2), scheduler.AfterTags(101)))
	require.NoError(t, s.MoveWorkers(b, a, 0))
	require.NoError(t, s.Submit(ctx, clEmpty, scheduler.WithTag(100)))
	require.NoError(t, s.Submit(ctx, clEmpty, scheduler.WithTag(101)))
	// ErrNoWorkers says how many workers the context has and the team
	// needs (it said "context has tasks and no workers").
	err = waitAllSays(t, ctx, s, `"A" has 1 worker, its team task "team" needs 2`)
	require.ErrorIs(t, err, scheduler.ErrNoWorkers)
	assert.NotContains(t, err.Error(), "and no workers")
	require.NoError(t, closeBefore(t, ctx, s, "two contexts of one worker each wait for teams of 2"))
	assert.Equal(t, int32(4), ranks.Load(), "both teams of 2 ran")
}
