package scheduler_test

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestStatsIdleExcludesTasksFoundSpinning is the regression test for
// statistics that counted a task's run time as both busy and idle: a
// worker that finds a task while it polls for work (WithSpin) ran it
// inside its idle period, whose whole length was added to Idle. Busy,
// Idle and Overhead must add up to the worker's lifetime, each at
// least 0.
func TestStatsIdleExcludesTasksFoundSpinning(t *testing.T) {
	ctx := testCtx(t)
	// A spin of a second or more: the worker polls when the tasks come.
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithStats(true), scheduler.WithSpin(1<<20))
	m := &eventMonitor{idle: make(chan int, 1)}
	s.SetMonitor(m, time.Hour)
	quick := &scheduler.Codelet{Name: "quick", CPU: func(*scheduler.Call) error { return nil }}
	const long = 50 * time.Millisecond
	slow := &scheduler.Codelet{Name: "slow", CPU: func(*scheduler.Call) error {
		time.Sleep(long) // run time to measure, not a wait for a result
		return nil
	}}
	t1 := scheduler.NewTask(quick)
	require.NoError(t, s.SubmitTask(ctx, t1))
	require.NoError(t, t1.Wait(ctx))
	// The worker, spinning since it started, went idle only after it ran
	// t1.
	waitIdle(ctx, t, m)
	// The worker is polling now: it finds the slow task in its spin.
	t2 := scheduler.NewTask(slow)
	require.NoError(t, s.SubmitTask(ctx, t2))
	require.NoError(t, t2.Wait(ctx))
	waitIdle(ctx, t, m) // it left the idle period in which it ran the slow task

	st := s.Stats()[0]
	life := time.Since(s.Epoch())
	assert.GreaterOrEqual(t, st.Busy, long)
	assert.LessOrEqual(t, st.Busy+st.Idle, life, "busy %v + idle %v: more than the worker's lifetime", st.Busy, st.Idle)
	assert.GreaterOrEqual(t, st.Overhead, time.Duration(0))

	// After Close, the figures are final and add up to the lifetime
	// up to Close.
	require.NoError(t, s.Close())
	st1 := s.Stats()[0]
	assert.Equal(t, st1, s.Stats()[0])
	assert.GreaterOrEqual(t, st1.Idle, st.Idle)
	assert.GreaterOrEqual(t, st1.Overhead, time.Duration(0))
	assert.LessOrEqual(t, st1.Busy+st1.Idle+st1.Overhead, time.Since(s.Epoch()))
}

// TestStatsCountCurrentIdlePeriod: after WaitAll, an idle worker's
// current idle period counts as Idle, so a worker that has waited
// long does not show that wait as Overhead.
func TestStatsCountCurrentIdlePeriod(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithStats(true), scheduler.WithSpin(0))
	m := &eventMonitor{idle: make(chan int, 1)}
	s.SetMonitor(m, time.Millisecond)
	quick := &scheduler.Codelet{Name: "quick", CPU: func(*scheduler.Call) error { return nil }}
	require.NoError(t, s.Submit(ctx, quick))
	require.NoError(t, s.WaitAll(ctx))
	waitIdle(ctx, t, m)
	a := s.Stats()[0]
	waitIdle(ctx, t, m) // an idle tick later
	b := s.Stats()[0]
	assert.Greater(t, b.Idle, a.Idle, "the sleeping worker's idle time grows")
	assert.GreaterOrEqual(t, a.Overhead, time.Duration(0))
	assert.GreaterOrEqual(t, b.Overhead, time.Duration(0))
}

// TestStatsUntimed: without WithStats the times are not measured, and
// Stats says so (Timed false) with Busy, Idle and Overhead 0, rather
// than a worker's whole lifetime as Overhead (which read as a worker
// that did nothing but overhead); the task counts are there either way.
func TestStatsUntimed(t *testing.T) {
	ctx := testCtx(t)
	for _, timed := range []bool{false, true} {
		s := newSched(t, scheduler.WithWorkers(1), scheduler.WithStats(timed))
		quick := &scheduler.Codelet{Name: "quick", CPU: func(*scheduler.Call) error { return nil }}
		require.NoError(t, s.Submit(ctx, quick))
		require.NoError(t, s.WaitAll(ctx))
		st := s.Stats()[0]
		assert.Equal(t, timed, st.Timed)
		assert.Equal(t, int64(1), st.Tasks)
		if !timed {
			assert.Zero(t, st.Busy+st.Idle+st.Overhead, "untimed: %+v", st)
		} else {
			assert.Positive(t, st.Busy+st.Idle+st.Overhead, "timed: %+v", st)
		}
	}
}

// TestWaitAllWithLongSpin is the regression test for a WithSpin so
// long that WaitAll waited for the whole spin: a worker published its
// completions only before sleeping. It publishes them after a bounded
// number of spin rounds.
func TestWaitAllWithLongSpin(t *testing.T) {
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithSpin(math.MaxInt))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	quick := &scheduler.Codelet{Name: "quick", CPU: func(*scheduler.Call) error { return nil }}
	for range 10 { // fewer than a batch of completions (64)
		require.NoError(t, s.Submit(ctx, quick))
	}
	require.NoError(t, s.WaitAll(ctx), "WaitAll waited for the spin")
	assert.Equal(t, int64(10), s.Stats()[0].Tasks)
	require.NoError(t, s.Close())
}

// waitIdle waits for an idle cycle of a worker reported to m.
func waitIdle(ctx context.Context, t *testing.T, m *eventMonitor) {
	t.Helper()
	select {
	case <-m.idle:
	case <-ctx.Done():
		t.Fatal("no worker went idle")
	}
}

// TestStatsTeamTask: a parallel task counts once in the workers' Tasks
// (on the member that completes it), and its run is Busy time on every
// member.
func TestStatsTeamTask(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2), scheduler.WithStats(true))
	var ran atomic.Int32
	spmd := &scheduler.Codelet{Name: "spmd", CPU: func(*scheduler.Call) error {
		ran.Add(1)
		time.Sleep(time.Millisecond) // Busy time to measure, not a wait for an event
		return nil
	}}
	require.NoError(t, s.Submit(ctx, spmd, scheduler.WithTeam(2)))
	require.NoError(t, s.WaitAll(ctx))
	require.Equal(t, int32(2), ran.Load(), "both members ran the task")
	var tasks int64
	for _, st := range s.Stats() {
		tasks += st.Tasks
		assert.GreaterOrEqual(t, st.Busy, time.Millisecond, "worker %d ran the team task: %+v", st.Worker, st)
	}
	assert.Equal(t, int64(1), tasks, "one task in all")
}
