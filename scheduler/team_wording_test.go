package scheduler_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestTeamRefusalOneCPUWorker: a team refused for a context (or a
// scheduler) of one CPU worker says "1 CPU worker", not "1 CPU workers"
// (a new user's trial of docs/scheduler.md).
func TestTeamRefusalOneCPUWorker(t *testing.T) {
	ctx := context.Background()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2))
	require.NoError(t, err)
	defer s.Close()
	c, err := s.NewContext("c1", scheduler.ContextSize(1))
	require.NoError(t, err)
	spmd := &scheduler.Codelet{Name: "spmd", Parallel: scheduler.SPMD, CPU: func(*scheduler.Call) error { return nil }}
	err = s.Submit(ctx, spmd, scheduler.WithTeam(2), scheduler.InContext(c))
	require.True(t, errors.Is(err, scheduler.ErrBadTeam), "%v", err)
	require.Contains(t, err.Error(), `context "c1" has 1 CPU worker (teams`)

	s1, err := scheduler.New(ctx, scheduler.WithWorkers(1))
	require.NoError(t, err)
	defer s1.Close()
	err = s1.Submit(ctx, spmd, scheduler.WithTeam(2))
	require.True(t, errors.Is(err, scheduler.ErrBadTeam), "%v", err)
	require.Contains(t, err.Error(), "the scheduler has 1 CPU worker (teams")
}
