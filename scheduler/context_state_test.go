package scheduler_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestContextFinishedThenDeleted: a context finished (its workers gone to
// its inheritor) can still be deleted; before the lifecycle was one
// state, the closing action of the finish stood for the delete's too and
// the context was never removed.
func TestContextFinishedThenDeleted(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	c, err := s.NewContext("c", scheduler.ContextWorkers(1))
	require.NoError(t, err)
	require.NoError(t, s.Submit(ctx, clEmpty, scheduler.InContext(c)))
	require.NoError(t, c.WaitAll(ctx))
	c.FinishedSubmitting()
	assert.True(t, c.Stopped())
	require.ErrorIs(t, s.Submit(ctx, clEmpty, scheduler.InContext(c)), scheduler.ErrContextStopped)
	assert.Equal(t, s.Global(), s.WorkerContext(1), "the finished context's worker went to its parent")
	require.NoError(t, c.Delete(nil))
	select {
	case <-c.Deleted():
	case <-ctx.Done():
		t.Fatal("a finished context was never deleted")
	}
	assert.NotContains(t, s.Contexts(), c)
	require.ErrorIs(t, c.Delete(nil), scheduler.ErrContextDeleted)
	err = s.Submit(ctx, clEmpty, scheduler.InContext(c))
	require.ErrorIs(t, err, scheduler.ErrContextDeleted)
}

// TestContextStopThenFinish: StopSubmission, then FinishedSubmitting with
// a task still pending: the workers move when it completes.
func TestContextStopThenFinish(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	c, err := s.NewContext("c", scheduler.ContextWorkers(0))
	require.NoError(t, err)
	release := make(chan struct{})
	block := &scheduler.Codelet{Name: "block", CPU: func(*scheduler.Call) error { <-release; return nil }}
	require.NoError(t, s.Submit(ctx, block, scheduler.InContext(c)))
	c.StopSubmission()
	require.ErrorIs(t, s.Submit(ctx, clEmpty, scheduler.InContext(c)), scheduler.ErrContextStopped)
	c.FinishedSubmitting()
	assert.Equal(t, c, s.WorkerContext(0), "a task is pending: the worker stays")
	close(release)
	require.NoError(t, c.WaitAll(ctx))
	waitResize(t, s, 0, "finished")
	assert.Equal(t, s.Global(), s.WorkerContext(0))
}
