package scheduler_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// A task's code that waits for tasks gets ErrInTask naming the wait and
// the task, instead of a deadlock (StarPU's -EDEADLK); the task's error
// is reported as any other, and nothing hangs: WaitAll and Close end.
func TestWaitInsideTaskRefused(t *testing.T) {
	cases := []struct {
		name string
		want string
		wait func(ctx context.Context, s *scheduler.Scheduler, h *scheduler.Handle, c *scheduler.Context, later *scheduler.Task) error
	}{
		{"WaitAll", "WaitAll called by the code of task", func(ctx context.Context, s *scheduler.Scheduler, _ *scheduler.Handle, _ *scheduler.Context, _ *scheduler.Task) error {
			return s.WaitAll(ctx)
		}},
		{"context WaitAll", `WaitAll of context "sub" called by the code of task`, func(ctx context.Context, _ *scheduler.Scheduler, _ *scheduler.Handle, c *scheduler.Context, _ *scheduler.Task) error {
			return c.WaitAll(ctx)
		}},
		{"Synchronous", `Submit of the Synchronous task "inner" called by the code of task`, func(ctx context.Context, s *scheduler.Scheduler, h *scheduler.Handle, _ *scheduler.Context, _ *scheduler.Task) error {
			return s.Submit(ctx, &scheduler.Codelet{Name: "inner", CPU: func(*scheduler.Call) error { return nil }}, scheduler.RW(h), scheduler.Synchronous())
		}},
		{"Wait", `Wait for a task of codelet "later" called by the code of task`, func(ctx context.Context, _ *scheduler.Scheduler, _ *scheduler.Handle, _ *scheduler.Context, later *scheduler.Task) error {
			return later.Wait(ctx)
		}},
		{"WaitTag", "WaitTag(77) called by the code of task", func(ctx context.Context, s *scheduler.Scheduler, _ *scheduler.Handle, _ *scheduler.Context, _ *scheduler.Task) error {
			return s.WaitTag(ctx, 77)
		}},
		{"Unregister", "Unregister of value handle *uint64 called by the code of task", func(ctx context.Context, _ *scheduler.Scheduler, h *scheduler.Handle, _ *scheduler.Context, _ *scheduler.Task) error {
			_, err := h.Unregister(ctx)
			return err
		}},
		// Close waits for every task, the caller's too: it hung. Refused,
		// it changes nothing, and the Close after WaitAll below closes.
		{"Close", "Close called by the code of task", func(_ context.Context, s *scheduler.Scheduler, _ *scheduler.Handle, _ *scheduler.Context, _ *scheduler.Task) error {
			return s.Close()
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := testCtx(t)
			s := newSched(t, scheduler.WithWorkers(2), scheduler.WithStats(true))
			sub, err := s.NewContext("sub")
			require.NoError(t, err)
			var x uint64
			h, err := s.RegisterValue(&x)
			require.NoError(t, err)
			// later is a successor of the waiting task (through h): the
			// wait could never end.
			later := scheduler.NewTask(&scheduler.Codelet{Name: "later", CPU: func(*scheduler.Call) error { return nil }}, scheduler.RW(h), scheduler.WithTag(77))
			var waitErr error
			submitted := make(chan struct{}) // later is submitted: its scheduler is known
			outer := scheduler.NewTask(&scheduler.Codelet{Name: "outer", CPU: func(*scheduler.Call) error {
				<-submitted
				waitErr = c.wait(ctx, s, h, sub, later)
				return waitErr
			}}, scheduler.RW(h))
			require.NoError(t, s.SubmitTask(ctx, outer))
			require.NoError(t, s.SubmitTask(ctx, later))
			close(submitted)
			err = s.WaitAll(ctx)
			require.ErrorIs(t, err, scheduler.ErrInTask)
			require.ErrorIs(t, waitErr, scheduler.ErrInTask)
			assert.Contains(t, waitErr.Error(), c.want)
			assert.Contains(t, waitErr.Error(), `of codelet "outer" on worker `)
			assert.NotErrorIs(t, err, context.DeadlineExceeded)
			require.NoError(t, s.Close())
		})
	}
}

// A wait inside a task that would not block is no misuse: a task may
// look at a task that has completed.
func TestWaitInsideTaskForCompletedTask(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	first := scheduler.NewTask(&scheduler.Codelet{Name: "first", CPU: func(*scheduler.Call) error { return errors.New("first's error") }})
	require.NoError(t, s.SubmitTask(ctx, first))
	require.Error(t, first.Wait(ctx))
	var got error
	require.NoError(t, s.Submit(ctx, &scheduler.Codelet{Name: "look", CPU: func(*scheduler.Call) error {
		got = first.Wait(ctx)
		return nil
	}}))
	err := s.WaitAll(ctx)
	require.Error(t, err) // first's error, reported once
	assert.EqualError(t, got, first.Err().Error())
	assert.NotErrorIs(t, got, scheduler.ErrInTask)
}
