package scheduler_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// Mistakes a new user makes: each must give a clear error, or work as
// the documentation says, and never hang.

// Wait ignores nil tasks, as After does, where it dereferenced them.
func TestWaitIgnoresNilTask(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1))
	var last *scheduler.Task // a loop that submitted nothing
	require.NoError(t, s.Wait(ctx, last))
	nop := &scheduler.Codelet{Name: "nop", CPU: func(*scheduler.Call) error { return nil }}
	last = scheduler.NewTask(nop)
	require.NoError(t, s.SubmitTask(ctx, last))
	require.NoError(t, s.Wait(ctx, nil, last))
}
