package scheduler_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// closeWhenStarted starts Close on a goroutine of its own once started
// is closed, waits until Close has begun (Closed), then closes release.
// It returns Close's result channel.
func closeWhenStarted(t *testing.T, s *scheduler.Scheduler, started <-chan struct{}, release chan<- struct{}) <-chan error {
	t.Helper()
	closed := make(chan error, 1)
	go func() {
		<-started
		go func() { closed <- s.Close() }()
		deadline := time.Now().Add(10 * time.Second)
		for !s.Closed() && time.Now().Before(deadline) {
			runtime.Gosched()
		}
		close(release)
	}()
	return closed
}

// TestDriverSynchronousSubmitDuringClose: a Synchronous Submit through
// a Driver whose task is running when Close starts on another goroutine
// returns what the task returned, once it completed: nil only for a
// task that ran and succeeded, its error for one that failed. Close
// waits for the task and reports its failure too.
func TestDriverSynchronousSubmitDuringClose(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		workers int // the last is driven: 1, the driver runs the task; 2, either
		fail    error
	}{
		{"driver alone, succeeds", 1, nil},
		{"driver alone, fails", 1, boom},
		{"with a launched worker, succeeds", 2, nil},
		{"with a launched worker, fails", 2, boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			s, d := drivenSched(t, tc.workers)
			started, release := make(chan struct{}), make(chan struct{})
			var ended atomic.Bool
			slow := &scheduler.Codelet{Name: "slow", CPU: func(*scheduler.Call) error {
				close(started)
				<-release
				ended.Store(true)
				return tc.fail
			}}
			closed := closeWhenStarted(t, s, started, release)
			err := d.Submit(ctx, slow, scheduler.Synchronous())
			assert.True(t, ended.Load(), "Submit returned before its task ended")
			if tc.fail == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, boom)
				assert.NotErrorIs(t, err, scheduler.ErrTaskPending)
			}
			select {
			case cerr := <-closed:
				if tc.fail == nil {
					require.NoError(t, cerr)
				} else {
					require.ErrorIs(t, cerr, boom)
				}
			case <-ctx.Done():
				t.Fatal("Close did not return")
			}
			require.NoError(t, d.Deinit())
		})
	}
}

// TestDriverSynchronousSubmitCanceledAtClose: a Synchronous Submit
// through a Driver whose task waits for a tag no task carries, while
// Close runs on another goroutine, returns the error Close canceled the
// task with (ErrNotSubmitted, naming the tag), not nil: the task never
// ran.
func TestDriverSynchronousSubmitCanceledAtClose(t *testing.T) {
	ctx := testCtx(t)
	s, d := drivenSched(t, 2)
	started, release := make(chan struct{}), make(chan struct{})
	// A task on the launched worker holds Close until the Synchronous
	// Submit below is under way.
	hold := &scheduler.Codelet{Name: "hold", CPU: func(*scheduler.Call) error {
		<-release
		return nil
	}}
	require.NoError(t, s.Submit(ctx, hold))
	var ran atomic.Bool
	orphan := &scheduler.Codelet{Name: "orphan", CPU: func(*scheduler.Call) error {
		ran.Store(true)
		return nil
	}}
	// The submitting goroutine closes started itself, just before it
	// submits: Close begins during the Submit or before it.
	closed := closeWhenStarted(t, s, started, release)
	close(started)
	err := d.Submit(ctx, orphan, scheduler.AfterTags(99), scheduler.Synchronous())
	require.Error(t, err, "the task never ran")
	assert.False(t, ran.Load())
	if !errors.Is(err, scheduler.ErrClosed) {
		require.ErrorIs(t, err, scheduler.ErrNotSubmitted)
		assert.Contains(t, err.Error(), "99")
	}
	assert.NotErrorIs(t, err, scheduler.ErrTaskPending)
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close did not return")
	}
	require.NoError(t, d.Deinit())
}

// TestDriverSynchronousSubmitCtxEndsDuringClose: a Synchronous Submit
// through a Driver whose context ends while Close waits for its task
// (which waits for a task the launched worker runs) returns at once with
// ctx's error and ErrTaskPending, not nil; the task runs on, the
// Driver's WaitAll drives the worker until Close stops it, and Close
// waits for the task.
func TestDriverSynchronousSubmitCtxEndsDuringClose(t *testing.T) {
	ctx := testCtx(t)
	s, d := drivenSched(t, 2)
	x := 0
	h, err := s.RegisterValue(&x)
	require.NoError(t, err)
	release := holdWorker(ctx, t, s, scheduler.W(h))
	var ran atomic.Bool
	after := &scheduler.Codelet{Name: "after", CPU: func(*scheduler.Call) error { ran.Store(true); return nil }}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Close starts once the Synchronous task is submitted (two tasks in
	// flight: hold and after), not before: Submit would refuse it.
	started, closing := make(chan struct{}), make(chan struct{})
	go func() {
		deadline := time.Now().Add(10 * time.Second)
		for s.Global().Pending() < 2 && time.Now().Before(deadline) {
			runtime.Gosched()
		}
		close(started)
	}()
	closed := closeWhenStarted(t, s, started, closing)
	go func() {
		<-closing
		cancel()
	}()
	err = d.Submit(sctx, after, scheduler.RW(h), scheduler.Synchronous())
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, scheduler.ErrTaskPending)
	assert.Contains(t, err.Error(), `"after"`)
	assert.False(t, ran.Load())
	release()
	require.NoError(t, d.WaitAll(ctx))
	assert.True(t, ran.Load(), "WaitAll returned before the task ran")
	select {
	case cerr := <-closed:
		require.NoError(t, cerr)
	case <-ctx.Done():
		t.Fatal("Close did not return")
	}
	require.NoError(t, d.Deinit())
}
