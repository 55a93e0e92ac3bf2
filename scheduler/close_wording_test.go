package scheduler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// closeBefore closes s and fails the test if Close has not returned
// when ctx ends (a hang).
func closeBefore(t *testing.T, ctx context.Context, s *scheduler.Scheduler, what string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		t.Fatalf("Close hung: %s", what)
		return nil
	}
}

// waitAllSays retries WaitAll with a short deadline until its error
// contains want (the state it describes is reached by the workers
// asynchronously), failing when ctx ends first.
func waitAllSays(t *testing.T, ctx context.Context, s *scheduler.Scheduler, want string) error {
	t.Helper()
	var err error
	for ctx.Err() == nil {
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		err = s.WaitAll(short)
		cancel()
		if err != nil && strings.Contains(err.Error(), want) {
			return err
		}
	}
	t.Fatalf("WaitAll never said %q; last: %v", want, err)
	return nil
}

// A task waiting for a tag no task carries is canceled by Close; its
// error says so, not that a task it depends on failed (nothing failed).
func TestCloseCancelsTagWaitWording(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	ok := &scheduler.Codelet{Name: "ok", CPU: func(*scheduler.Call) error { return nil }}
	task := scheduler.NewTask(ok, scheduler.AfterTags(12345))
	require.NoError(t, s.SubmitTask(ctx, task))
	err = closeBefore(t, ctx, s, "a task waits for a tag never submitted")
	require.ErrorIs(t, err, scheduler.ErrCanceled)
	require.ErrorIs(t, task.Err(), scheduler.ErrNotSubmitted)
	msg := task.Err().Error()
	assert.Equal(t, `scheduler: task "ok" canceled at Close: it waited, itself or through a task it depends on, for a task never submitted: the scheduler closed, and no task carries tag 12345`, msg)
	assert.NotContains(t, msg, "failed")
	// Close's summary line leaves the why to the first task's error.
	assert.Contains(t, err.Error(), "1 task not run (the first canceled, in completion order: "+msg)
	assert.NotContains(t, err.Error(), "depend on failed")
}

// After Close, NewContext and the other context calls name the context
// once and the cause, not a stray `"global":`.
func TestContextCallsAfterCloseWording(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	c, err := s.NewContext("c", scheduler.ContextWorkers(0))
	require.NoError(t, err)
	assert.False(t, s.Closed())
	require.NoError(t, s.Close())
	assert.True(t, s.Closed())
	_, err = s.NewContext("late")
	require.ErrorIs(t, err, scheduler.ErrClosed)
	assert.Equal(t, `creating context "late": scheduler: closed`, err.Error())
	err = c.AddWorkers(1)
	require.ErrorIs(t, err, scheduler.ErrClosed)
	assert.Equal(t, `adding workers to "c": scheduler: closed`, err.Error())
	err = s.MoveWorkers(c, s.Global(), 0)
	require.ErrorIs(t, err, scheduler.ErrClosed)
	assert.Equal(t, 1, strings.Count(err.Error(), `"c"`), err.Error())
}

// Context.String is what its doc says: `context "NAME"`, Name alone.
func TestContextString(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	defer s.Close()
	b, err := s.NewContext("b")
	require.NoError(t, err)
	assert.Equal(t, `context "b"`, b.String())
	assert.Equal(t, "b", b.Name())
	assert.Equal(t, `context "global"`, s.Global().String())
}
