package scheduler_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// A detached task holds its data until done is called from elsewhere:
// a writer after it waits, a reader before it runs first, and no worker is
// busy meanwhile.
func TestDetachedHoldsDataUntilDone(t *testing.T) {
	s, err := scheduler.New(context.Background(), scheduler.WithWorkers(2))
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	v := []int{0}
	h, err := s.RegisterVector(v)
	require.NoError(t, err)

	started := make(chan func(error), 1)
	hold := &scheduler.Codelet{Name: "hold", Detached: func(t *scheduler.Task, done func(error)) { started <- done }}
	add := func(k int) *scheduler.Codelet {
		return &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
			scheduler.VectorOf[int](c, 0)[0] = scheduler.VectorOf[int](c, 0)[0]*10 + k
			return nil
		}}
	}
	require.NoError(t, s.Submit(ctx, add(1), scheduler.RW(h)))
	require.NoError(t, s.Submit(ctx, hold, scheduler.R(h)))
	after := scheduler.NewTask(add(2), scheduler.RW(h))
	require.NoError(t, s.SubmitTask(ctx, after))

	done := <-started // add(1) has completed: the detached task reads its result
	assert.Equal(t, 1, v[0])
	select {
	case <-after.Done():
		t.Fatal("the writer after a detached reader ran before done was called")
	default:
	}
	// Both workers are free meanwhile: an unrelated task runs.
	other, err := s.RegisterVector([]int{0})
	require.NoError(t, err)
	require.NoError(t, s.Submit(ctx, add(5), scheduler.RW(other), scheduler.Synchronous()))

	done(nil)
	require.NoError(t, after.Wait(ctx))
	require.NoError(t, s.WaitAll(ctx))
	assert.Equal(t, 12, v[0])
}

// An error passed to done fails the task like a worker's error; a panic in
// Detached fails it too; later readers are canceled, a later writer runs.
func TestDetachedErrors(t *testing.T) {
	s, err := scheduler.New(context.Background(), scheduler.WithWorkers(1))
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	h, err := s.RegisterVector([]int{0})
	require.NoError(t, err)
	lost := errors.New("link down")
	fail := &scheduler.Codelet{Name: "recv", Detached: func(t *scheduler.Task, done func(error)) { go done(lost) }}
	boom := &scheduler.Codelet{Name: "send", Detached: func(t *scheduler.Task, done func(error)) { panic("boom") }}
	read := &scheduler.Codelet{Name: "read", CPU: func(c *scheduler.Call) error { return nil }}

	t1 := scheduler.NewTask(fail, scheduler.W(h))
	require.NoError(t, s.SubmitTask(ctx, t1))
	r1 := scheduler.NewTask(read, scheduler.R(h))
	require.NoError(t, s.SubmitTask(ctx, r1))
	require.ErrorIs(t, t1.Wait(ctx), lost)
	var te *scheduler.TaskError
	require.ErrorAs(t, t1.Err(), &te)
	assert.Equal(t, "recv", te.Codelet)
	assert.Equal(t, -1, te.Worker)
	require.ErrorIs(t, r1.Wait(ctx), lost, "a reader of data a failed detached task wrote")

	t2 := scheduler.NewTask(boom, scheduler.W(h))
	require.NoError(t, s.SubmitTask(ctx, t2))
	require.ErrorAs(t, t2.Wait(ctx), &te)
	assert.True(t, te.Panicked)

	team := scheduler.NewTask(&scheduler.Codelet{Name: "x", Detached: func(*scheduler.Task, func(error)) {}}, scheduler.WithTeam(2))
	require.ErrorIs(t, s.SubmitTask(ctx, team), scheduler.ErrBadTeam)
	err = s.WaitAll(ctx)
	require.ErrorIs(t, err, lost)
}

// A callback sees its task's outcome through Task.Err, as WithCallback's
// documentation says: the error of a failed task, nil for a successful one.
func TestCallbackSeesErr(t *testing.T) {
	s, err := scheduler.New(context.Background(), scheduler.WithWorkers(1))
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	boom := errors.New("boom")
	seen := make(chan error, 2)
	cb := scheduler.WithCallback(func(t *scheduler.Task) { seen <- t.Err() })
	require.NoError(t, s.Submit(ctx, &scheduler.Codelet{Name: "fail", CPU: func(*scheduler.Call) error { return boom }}, cb))
	require.ErrorIs(t, <-seen, boom)
	require.NoError(t, s.Submit(ctx, &scheduler.Codelet{Name: "ok", CPU: func(*scheduler.Call) error { return nil }}, cb))
	require.NoError(t, <-seen)
	require.ErrorIs(t, s.WaitAll(ctx), boom)
}

// TestDetachedPanicAfterDone: a Detached function that calls done(nil) and
// then panics has already completed its task - a pooled one (Submit's)
// may be back in the pool, or running again for another Submit - so the
// panic cannot fail it. Each task's OnDone sees nil, exactly once, and
// the panic is reported by WaitAll, naming the codelet, as a callback's
// is. Under -race, the recovery reading the task after done (to name the
// failure) is a report against the next Submit's write of the reused
// task.
func TestDetachedPanicAfterDone(t *testing.T) {
	s, err := scheduler.New(context.Background(), scheduler.WithWorkers(2))
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	late := &scheduler.Codelet{Name: "late", Detached: func(_ *scheduler.Task, done func(error)) {
		done(nil)
		panic("after done")
	}}
	plain := &scheduler.Codelet{Name: "plain", CPU: func(*scheduler.Call) error { return nil }}
	const n = 300
	var calls [2 * n]atomic.Int32
	var failed atomic.Int32
	for i := range n {
		for k, cl := range []*scheduler.Codelet{late, plain} {
			j := 2*i + k
			require.NoError(t, s.Submit(ctx, cl, scheduler.WithArg(j), scheduler.OnDone(func(err error) {
				calls[j].Add(1)
				if err != nil {
					failed.Add(1)
				}
			})))
		}
	}
	err = s.WaitAll(ctx)
	for j := range calls {
		require.Equal(t, int32(1), calls[j].Load(), "OnDone calls of task %d", j)
	}
	assert.Zero(t, failed.Load(), "tasks failed by a panic after their done")
	var te *scheduler.TaskError
	require.ErrorAs(t, err, &te, "a panic after done is reported")
	assert.Equal(t, "late", te.Codelet)
	assert.True(t, te.Panicked)
	assert.Contains(t, te.Error(), "after done")
	assert.NotContains(t, err.Error(), `"plain"`, "a panic reported on another codelet's task")
	require.NoError(t, s.WaitAll(ctx))
}

// Trial finding: a Detached function's panic after its done was kept
// for the scheduler's WaitAll only, so that the WaitAll of the context
// the task was submitted to returned nil (and could return before the
// panic was recorded), while a failed task of the context is reported
// there. It is now the context's to report, as a task's failure is:
// the context's WaitAll waits for Detached to return and returns the
// panic, and the scheduler's WaitAll, taking each error once, then
// returns nil.
func TestDetachedPanicAfterDoneReachesItsContext(t *testing.T) {
	ctx := context.Background()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2))
	require.NoError(t, err)
	defer s.Close()
	c, err := s.NewContext("c", scheduler.ContextWorkers(0, 1))
	require.NoError(t, err)
	late := &scheduler.Codelet{Name: "late", Detached: func(_ *scheduler.Task, done func(error)) {
		done(nil)
		panic("after done")
	}}
	require.NoError(t, s.Submit(ctx, late, scheduler.InContext(c)))
	err = c.WaitAll(ctx)
	var te *scheduler.TaskError
	require.ErrorAs(t, err, &te, "the context's WaitAll reports the panic")
	assert.Equal(t, "late", te.Codelet)
	assert.True(t, te.Panicked)
	assert.Equal(t, "c", te.Context)
	require.NoError(t, s.WaitAll(ctx), "reported once")

	// The other way round: the scheduler's WaitAll takes it first.
	require.NoError(t, s.Submit(ctx, late, scheduler.InContext(c)))
	require.ErrorAs(t, s.WaitAll(ctx), &te)
	require.NoError(t, c.WaitAll(ctx), "reported once")
}
