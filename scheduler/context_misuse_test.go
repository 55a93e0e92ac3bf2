package scheduler_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// Misuse of the context API: each is an error naming what is wrong, and
// changes nothing.

// TestMoveWorkersForeignContext: MoveWorkers refuses a source or a
// destination of another scheduler, saying so, and the worker stays.
func TestMoveWorkersForeignContext(t *testing.T) {
	ctx := testCtx(t)
	s1 := newSched(t, scheduler.WithWorkers(2))
	s2 := newSched(t, scheduler.WithWorkers(2))
	a, err := s1.NewContext("A", scheduler.ContextWorkers(0, 1))
	require.NoError(t, err)
	f, err := s2.NewContext("F", scheduler.ContextWorkers(1))
	require.NoError(t, err)
	for i, tc := range []struct {
		s        *scheduler.Scheduler
		from, to *scheduler.Context
		id       int
	}{
		{s1, a, f, 0}, // foreign destination
		{s2, a, f, 1}, // foreign source
		{s2, f, a, 1}, // foreign destination, for s2
	} {
		err := tc.s.MoveWorkers(tc.from, tc.to, tc.id)
		assert.ErrorIs(t, err, scheduler.ErrBadContext, "case %d", i)
		assert.ErrorContains(t, err, "belongs to another scheduler", "case %d", i)
	}
	assert.Equal(t, []int{0, 1}, a.Workers())
	assert.Equal(t, []int{1}, f.Workers())
	assert.Equal(t, a, s1.WorkerContext(0))
	r := newRanOn()
	cl := r.codelet("a", 0)
	for range 50 {
		require.NoError(t, s1.Submit(ctx, cl, scheduler.InContext(a)))
	}
	require.NoError(t, a.WaitAll(ctx))
	assert.Subset(t, []int{0, 1}, r.workers())
}

// TestContextAPIMisuse: bad names, a move to the same context,
// SetInheritor of a deleted context and SubmitTask of a nil task are
// refused with an error.
func TestContextAPIMisuse(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(4))
	a, err := s.NewContext("A", scheduler.ContextWorkers(0, 1))
	require.NoError(t, err)
	b, err := s.NewContext("B", scheduler.ContextWorkers(2))
	require.NoError(t, err)
	d, err := s.NewContext("D")
	require.NoError(t, err)
	require.NoError(t, d.Delete(nil))
	waitDeleted(t, d)

	for _, tc := range []struct {
		parent *scheduler.Context
		name   string
		want   string
	}{
		{s.Global(), "", "needs a name"},
		{s.Global(), scheduler.GlobalName, "reserved"},
		{s.Global(), "A", `"A" is in use`},
		{a, "B", `"B" is in use`},
	} {
		_, err := tc.parent.NewContext(tc.name)
		assert.ErrorIs(t, err, scheduler.ErrBadContext, "name %q", tc.name)
		assert.ErrorContains(t, err, tc.want, "name %q", tc.name)
	}
	d2, err := s.NewContext("D")
	require.NoError(t, err, "the name of a deleted context is free")

	err = s.MoveWorkers(a, a, 0)
	assert.ErrorIs(t, err, scheduler.ErrBadContext)
	assert.ErrorContains(t, err, "same context")

	err = d.SetInheritor(a)
	assert.ErrorIs(t, err, scheduler.ErrContextDeleted)
	assert.ErrorContains(t, err, `"D" was deleted`)

	assert.NotPanics(t, func() { err = s.SubmitTask(ctx, nil) })
	assert.ErrorIs(t, err, scheduler.ErrNoImplementation)
	assert.ErrorContains(t, err, "nil task")
	bt := s.NewBatch()
	assert.NotPanics(t, func() { err = bt.SubmitTask(ctx, nil) })
	assert.ErrorIs(t, err, scheduler.ErrNoImplementation)
	ds := newSched(t, scheduler.WithWorkers(2), scheduler.WithDrivenWorkers(1))
	drv, err := ds.Driver(1)
	require.NoError(t, err)
	require.NoError(t, drv.Init())
	assert.NotPanics(t, func() { err = drv.SubmitTask(ctx, nil) })
	assert.ErrorIs(t, err, scheduler.ErrNoImplementation)
	require.NoError(t, drv.Deinit())

	// Nothing changed.
	assert.Equal(t, []*scheduler.Context{s.Global(), a, b, d2}, s.Contexts())
	assert.Equal(t, []int{0, 1}, a.Workers())
	assert.Equal(t, []int{2}, b.Workers())
}

// TestContextAPIAfterClose: after Close, the calls that change contexts
// fail with ErrClosed and change nothing.
func TestContextAPIAfterClose(t *testing.T) {
	s := newSched(t, scheduler.WithWorkers(4))
	a, err := s.NewContext("A", scheduler.ContextWorkers(0, 1))
	require.NoError(t, err)
	b, err := s.NewContext("B", scheduler.ContextWorkers(2))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	_, err = s.NewContext("late")
	assert.ErrorIs(t, err, scheduler.ErrClosed, "NewContext")
	_, err = a.NewContext("late")
	assert.ErrorIs(t, err, scheduler.ErrClosed, "Context.NewContext")
	assert.ErrorIs(t, a.AddWorkers(3), scheduler.ErrClosed, "AddWorkers")
	assert.ErrorIs(t, a.RemoveWorkers(0), scheduler.ErrClosed, "RemoveWorkers")
	assert.ErrorIs(t, s.MoveWorkers(a, b, 0), scheduler.ErrClosed, "MoveWorkers")
	assert.ErrorIs(t, a.Delete(nil), scheduler.ErrClosed, "Delete")
	assert.Equal(t, []*scheduler.Context{s.Global(), a, b}, s.Contexts())
	assert.Equal(t, []int{0, 1}, a.Workers())
	assert.Equal(t, []int{2}, b.Workers())
}
