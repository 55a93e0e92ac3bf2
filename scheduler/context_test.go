package scheduler_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// ranOn records which worker ran each task of a codelet.
type ranOn struct {
	mu  sync.Mutex
	ws  map[int]int // worker -> tasks
	n   atomic.Int64
	max atomic.Int64 // most tasks running at once
	cur atomic.Int64
}

func newRanOn() *ranOn { return &ranOn{ws: map[int]int{}} }

func (r *ranOn) codelet(name string, hold time.Duration) *scheduler.Codelet {
	return &scheduler.Codelet{Name: name, CPU: func(c *scheduler.Call) error {
		cur := r.cur.Add(1)
		for {
			m := r.max.Load()
			if cur <= m || r.max.CompareAndSwap(m, cur) {
				break
			}
		}
		if hold > 0 {
			time.Sleep(hold)
		}
		r.cur.Add(-1)
		r.mu.Lock()
		r.ws[c.Worker]++
		r.mu.Unlock()
		r.n.Add(1)
		return nil
	}}
}

func (r *ranOn) workers() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []int
	for w := range r.ws {
		ids = append(ids, w)
	}
	slices.Sort(ids)
	return ids
}

// eventually polls cond every millisecond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v: %s", d, msg)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestContextCreate(t *testing.T) {
	s := newSched(t, scheduler.WithWorkers(4))
	g := s.Global()
	assert.Equal(t, scheduler.GlobalName, g.Name())
	assert.Equal(t, []int{0, 1, 2, 3}, g.Workers())

	a, err := s.NewContext("a", scheduler.ContextWorkers(2, 0), scheduler.ContextPolicy("eager"))
	require.NoError(t, err)
	assert.Equal(t, []int{0, 2}, a.Workers())
	assert.Equal(t, "eager", a.PolicyName())
	assert.Equal(t, g, a.Parent())

	b, err := s.NewContext("b", scheduler.ContextSize(1), scheduler.ContextPolicy("dmda"))
	require.NoError(t, err)
	assert.Equal(t, []int{1}, b.Workers(), "ContextSize takes the free workers with the lowest ids")

	e, err := s.NewContext("empty")
	require.NoError(t, err)
	assert.Empty(t, e.Workers())
	assert.Equal(t, "lws", e.PolicyName(), "the scheduler's policy by default")

	assert.Equal(t, []*scheduler.Context{g, a, b, e}, s.Contexts())
	assert.Equal(t, a, s.WorkerContext(2))
	assert.Equal(t, g, s.WorkerContext(3))
	assert.Nil(t, s.WorkerContext(9))

	bad := []struct {
		name string
		opts []scheduler.ContextOption
		want error
	}{
		{"unknown worker", []scheduler.ContextOption{scheduler.ContextWorkers(7)}, scheduler.ErrBadWorker},
		{"negative worker", []scheduler.ContextOption{scheduler.ContextWorkers(-1)}, scheduler.ErrBadWorker},
		{"worker listed twice", []scheduler.ContextOption{scheduler.ContextWorkers(3, 3)}, scheduler.ErrBadWorker},
		{"worker of another context", []scheduler.ContextOption{scheduler.ContextWorkers(3, 0)}, scheduler.ErrWorkerBusy},
		{"too many", []scheduler.ContextOption{scheduler.ContextSize(2)}, scheduler.ErrBadWorker},
		{"negative size", []scheduler.ContextOption{scheduler.ContextSize(-2)}, scheduler.ErrBadContext},
		{"unknown policy", []scheduler.ContextOption{scheduler.ContextPolicy("nope")}, scheduler.ErrUnknownPolicy},
	}
	for _, tc := range bad {
		_, err := s.NewContext(tc.name, tc.opts...)
		assert.ErrorIs(t, err, tc.want, tc.name)
	}
	// Nothing changed.
	assert.Equal(t, []*scheduler.Context{g, a, b, e}, s.Contexts())
	assert.Equal(t, g, s.WorkerContext(3))
	assert.Equal(t, []int{0, 2}, a.Workers())
}

func TestContextSubmitRunsOnItsWorkers(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(4))
	a, err := s.NewContext("a", scheduler.ContextWorkers(0))
	require.NoError(t, err)
	b, err := s.NewContext("b", scheduler.ContextWorkers(1, 2), scheduler.ContextPolicy("eager"))
	require.NoError(t, err)
	ra, rb := newRanOn(), newRanOn()
	cla, clb := ra.codelet("a", 0), rb.codelet("b", 100*time.Microsecond)
	inB := scheduler.Within(ctx, b)
	for i := 0; i < 200; i++ {
		require.NoError(t, s.Submit(ctx, cla, scheduler.InContext(a)))
		require.NoError(t, s.Submit(inB, clb))
	}
	task := scheduler.NewTask(cla)
	task.Context = a
	require.NoError(t, s.SubmitTask(ctx, task))
	require.NoError(t, s.WaitAll(ctx))
	assert.Equal(t, int64(201), ra.n.Load())
	assert.Equal(t, int64(200), rb.n.Load())
	assert.Equal(t, []int{0}, ra.workers(), "tasks of a run on a's worker only")
	assert.Subset(t, []int{1, 2}, rb.workers(), "tasks of b run on b's workers only")
	assert.Equal(t, a, task.Context)
}

func TestContextWaitAllWithin(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	a, err := s.NewContext("a", scheduler.ContextWorkers(0))
	require.NoError(t, err)
	b, err := s.NewContext("b", scheduler.ContextWorkers(1))
	require.NoError(t, err)
	gate := make(chan struct{})
	block := &scheduler.Codelet{Name: "block", CPU: func(*scheduler.Call) error { <-gate; return nil }}
	ra := newRanOn()
	require.NoError(t, s.Submit(scheduler.Within(ctx, b), block))
	for i := 0; i < 50; i++ {
		require.NoError(t, s.Submit(scheduler.Within(ctx, a), ra.codelet("a", 0)))
	}
	// WaitAll with a's context returns while b's task is blocked.
	require.NoError(t, s.WaitAll(scheduler.Within(ctx, a)))
	assert.Equal(t, int64(50), ra.n.Load())
	assert.Equal(t, int64(1), b.Pending())
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	err = b.WaitAll(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, scheduler.ErrNoWorkers, "b has a worker")
	close(gate)
	require.NoError(t, b.WaitAll(ctx))
	require.NoError(t, s.WaitAll(ctx))
}

// A context's WaitAll that times out explains the waits of its own tasks
// (a tag no task carries, a task never submitted), not those of another
// context's tasks.
func TestContextWaitAllExplainsOwnWaits(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	a, err := s.NewContext("a", scheduler.ContextWorkers(0))
	require.NoError(t, err)
	b, err := s.NewContext("b", scheduler.ContextWorkers(1))
	require.NoError(t, err)
	nop := &scheduler.Codelet{Name: "nop", CPU: func(*scheduler.Call) error { return nil }}
	gate := make(chan struct{})
	defer close(gate)
	block := &scheduler.Codelet{Name: "block", CPU: func(*scheduler.Call) error { <-gate; return nil }}
	require.NoError(t, s.Submit(ctx, nop, scheduler.AfterTags(777)))
	require.NoError(t, s.Submit(ctx, nop, scheduler.After(scheduler.NewTask(&scheduler.Codelet{Name: "globalNever", CPU: nop.CPU}))))
	require.NoError(t, s.Submit(scheduler.Within(ctx, b), block))
	require.NoError(t, s.Submit(scheduler.Within(ctx, a), nop, scheduler.AfterTags(888)))
	require.NoError(t, s.Submit(scheduler.Within(ctx, a), nop, scheduler.After(scheduler.NewTask(&scheduler.Codelet{Name: "aNever", CPU: nop.CPU}))))

	wait := func(c *scheduler.Context) error {
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		return c.WaitAll(short)
	}
	err = wait(b)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, scheduler.ErrNotSubmitted, "b's only task waits for nothing unsubmitted: %v", err)
	err = wait(a)
	require.ErrorIs(t, err, scheduler.ErrNotSubmitted)
	assert.Contains(t, err.Error(), "tag 888")
	assert.Contains(t, err.Error(), `task "aNever"`)
	assert.NotContains(t, err.Error(), "777")
	assert.NotContains(t, err.Error(), "globalNever")
	// The scheduler's WaitAll explains every wait.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	err = s.WaitAll(short)
	for _, want := range []string{"tag 777", "tag 888", `"aNever"`, `"globalNever"`} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestContextEmptyKeepsTasks(t *testing.T) {
	ctx := testCtx(t)
	for _, pol := range scheduler.Policies() {
		t.Run(pol, func(t *testing.T) {
			s := newSched(t, scheduler.WithWorkers(3))
			e, err := s.NewContext("empty", scheduler.ContextPolicy(pol))
			require.NoError(t, err)
			r := newRanOn()
			cl := r.codelet("kept", 0)
			var v uint64
			h, err := s.RegisterValue(&v)
			require.NoError(t, err)
			for i := 0; i < 20; i++ {
				require.NoError(t, s.Submit(ctx, cl, scheduler.InContext(e)))
				require.NoError(t, s.Submit(ctx, clIncr, scheduler.RW(h), scheduler.InContext(e)))
			}
			everyWorkerLooked(t, s)
			assert.Zero(t, r.n.Load(), "no worker: nothing runs")
			assert.Equal(t, int64(40), e.Pending())
			require.NoError(t, e.AddWorkers(1, 2))
			require.NoError(t, e.WaitAll(ctx))
			assert.Equal(t, int64(20), r.n.Load())
			assert.Subset(t, []int{1, 2}, r.workers())
			_, err = h.Unregister(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(20), v)
		})
	}
}

func TestContextNoWorkersReportedAtWaitAll(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	lonely, err := s.NewContext("lonely")
	require.NoError(t, err)
	r := newRanOn()
	for i := 0; i < 5; i++ {
		require.NoError(t, s.Submit(ctx, r.codelet("t", 0), scheduler.InContext(lonely)))
	}
	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	err = s.WaitAll(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, scheduler.ErrNoWorkers)
	assert.Contains(t, err.Error(), `"lonely" has 5 tasks pending`)
	short2, cancel2 := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel2()
	require.ErrorIs(t, lonely.WaitAll(short2), scheduler.ErrNoWorkers)

	// Close lends the context a worker: no task is lost.
	require.NoError(t, s.Close())
	assert.Equal(t, int64(5), r.n.Load())
	rs := s.Resizes()
	require.NotEmpty(t, rs)
	assert.Equal(t, "close", rs[0].Reason)
	assert.Equal(t, "lonely", rs[0].To)
}

func TestContextStopSubmission(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	c, err := s.NewContext("c", scheduler.ContextWorkers(0))
	require.NoError(t, err)
	gate := make(chan struct{})
	var ran atomic.Int64
	cl := &scheduler.Codelet{Name: "gated", CPU: func(*scheduler.Call) error { <-gate; ran.Add(1); return nil }}
	for i := 0; i < 10; i++ {
		require.NoError(t, s.Submit(ctx, cl, scheduler.InContext(c)))
	}
	c.StopSubmission()
	assert.True(t, c.Stopped())
	err = s.Submit(ctx, cl, scheduler.InContext(c))
	require.ErrorIs(t, err, scheduler.ErrContextStopped)
	assert.Contains(t, err.Error(), `"c"`)
	close(gate)
	require.NoError(t, c.WaitAll(ctx))
	assert.Equal(t, int64(10), ran.Load(), "tasks submitted before the stop run")
}

func TestContextAddRemoveMove(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(4))
	a, err := s.NewContext("a", scheduler.ContextWorkers(0, 1))
	require.NoError(t, err)
	b, err := s.NewContext("b", scheduler.ContextWorkers(2))
	require.NoError(t, err)

	require.NoError(t, b.AddWorkers(3))
	assert.Equal(t, []int{2, 3}, b.Workers())
	require.NoError(t, b.AddWorkers(3), "adding a member again changes nothing")
	require.NoError(t, s.MoveWorkers(a, b, 1))
	assert.Equal(t, []int{0}, a.Workers())
	assert.Equal(t, []int{1, 2, 3}, b.Workers())
	require.NoError(t, b.RemoveWorkers(3))
	assert.Equal(t, s.Global(), s.WorkerContext(3))

	// Bad input changes nothing.
	assert.ErrorIs(t, a.AddWorkers(2), scheduler.ErrWorkerBusy)
	assert.ErrorIs(t, a.AddWorkers(3, 9), scheduler.ErrBadWorker)
	assert.ErrorIs(t, a.RemoveWorkers(2), scheduler.ErrBadWorker)
	assert.ErrorIs(t, s.MoveWorkers(a, b, 1), scheduler.ErrBadWorker)
	assert.ErrorIs(t, s.MoveWorkers(a, b, 0, 0), scheduler.ErrBadWorker)
	assert.ErrorIs(t, s.Global().RemoveWorkers(0), scheduler.ErrBadContext)
	assert.ErrorIs(t, s.MoveWorkers(nil, b, 0), scheduler.ErrBadContext)
	assert.Equal(t, []int{0}, a.Workers())
	assert.Equal(t, []int{1, 2}, b.Workers())
	assert.Equal(t, s.Global(), s.WorkerContext(3))

	// Each worker applies its moves at its next safe point (coalescing
	// those posted meanwhile): its last recorded resize leads to its
	// context.
	eventually(t, 5*time.Second, func() bool {
		last := map[int]string{}
		for _, rz := range s.Resizes() {
			last[rz.Worker] = rz.To
		}
		return last[0] == "a" && last[1] == "b" && last[2] == "b" && (last[3] == "" || last[3] == scheduler.GlobalName)
	}, "every move applied")
	// Tasks follow the workers: after the moves, b's tasks run on 1 and 2.
	// (Before its safe point, worker 3 could still pop one of b's tasks:
	// a task submitted just after RemoveWorkers returned ran there in 1
	// of 12 loaded runs when the moves were not awaited first.)
	r := newRanOn()
	for i := 0; i < 100; i++ {
		require.NoError(t, s.Submit(ctx, r.codelet("b", 0), scheduler.InContext(b)))
	}
	require.NoError(t, b.WaitAll(ctx))
	assert.Subset(t, []int{1, 2}, r.workers())
	for _, rz := range s.Resizes() {
		assert.NotEqual(t, rz.From, rz.To, "%v", rz)
		assert.NotEmpty(t, rz.Reason)
	}
}

func TestContextRemoveWhileQueued(t *testing.T) {
	// Tasks queued for a worker that leaves go to the context's other
	// workers, or wait for new ones; none is lost or run twice.
	ctx := testCtx(t)
	for _, pol := range scheduler.Policies() {
		t.Run(pol, func(t *testing.T) {
			s := newSched(t, scheduler.WithWorkers(3))
			c, err := s.NewContext("c", scheduler.ContextWorkers(0, 1), scheduler.ContextPolicy(pol))
			require.NoError(t, err)
			gate := make(chan struct{})
			var counts [300]atomic.Int32
			cl := &scheduler.Codelet{Name: "count", CPU: func(call *scheduler.Call) error {
				<-gate
				counts[call.Arg.(int)].Add(1)
				return nil
			}}
			for i := range counts {
				require.NoError(t, s.Submit(ctx, cl, scheduler.InContext(c), scheduler.WithArg(i)))
			}
			require.NoError(t, c.RemoveWorkers(0, 1))
			require.NoError(t, c.AddWorkers(2))
			close(gate)
			require.NoError(t, c.WaitAll(ctx))
			for i := range counts {
				assert.Equal(t, int32(1), counts[i].Load(), "task %d", i)
			}
		})
	}
}

func TestContextDeleteWithInheritor(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(4))
	a, err := s.NewContext("a", scheduler.ContextWorkers(1, 2))
	require.NoError(t, err)
	b, err := s.NewContext("b", scheduler.ContextWorkers(3))
	require.NoError(t, err)
	gate := make(chan struct{})
	r := newRanOn()
	inner := r.codelet("a", 0)
	cl := &scheduler.Codelet{Name: "gated", CPU: func(c *scheduler.Call) error { <-gate; return inner.CPU(c) }}
	for i := 0; i < 40; i++ {
		require.NoError(t, s.Submit(ctx, cl, scheduler.InContext(a)))
	}
	require.NoError(t, a.Delete(b))
	require.ErrorIs(t, s.Submit(ctx, cl, scheduler.InContext(a)), scheduler.ErrContextStopped)
	require.ErrorIs(t, a.Delete(b), scheduler.ErrContextDeleted, "deleting twice")
	// Its tasks wait at the gate: the deletion cannot have completed.
	select {
	case <-a.Deleted():
		t.Fatal("deleted before its tasks finished")
	default:
	}
	assert.Equal(t, []int{1, 2}, a.Workers(), "workers stay until the tasks finish")
	close(gate)
	select {
	case <-a.Deleted():
	case <-ctx.Done():
		t.Fatal("context never deleted")
	}
	assert.Equal(t, int64(40), r.n.Load())
	assert.Subset(t, []int{1, 2}, r.workers())
	assert.Equal(t, []int{1, 2, 3}, b.Workers())
	assert.NotContains(t, s.Contexts(), a)
	require.ErrorIs(t, a.AddWorkers(0), scheduler.ErrContextDeleted)
	require.ErrorIs(t, s.Submit(ctx, cl, scheduler.InContext(a)), scheduler.ErrContextStopped)
	require.NoError(t, s.WaitAll(ctx))
	// b's tasks now run on the inherited workers too.
	r2 := newRanOn()
	for i := 0; i < 200; i++ {
		require.NoError(t, s.Submit(ctx, r2.codelet("b", 20*time.Microsecond), scheduler.InContext(b)))
	}
	require.NoError(t, b.WaitAll(ctx))
	assert.Subset(t, []int{1, 2, 3}, r2.workers())
}

func TestContextDeleteBadInput(t *testing.T) {
	s := newSched(t, scheduler.WithWorkers(3))
	other := newSched(t, scheduler.WithWorkers(1))
	foreign, err := other.NewContext("foreign")
	require.NoError(t, err)
	a, err := s.NewContext("a", scheduler.ContextWorkers(0))
	require.NoError(t, err)
	sub, err := a.NewContext("sub")
	require.NoError(t, err)
	gone, err := s.NewContext("gone")
	require.NoError(t, err)
	require.NoError(t, gone.Delete(nil))
	waitDeleted(t, gone)

	assert.ErrorIs(t, s.Global().Delete(nil), scheduler.ErrBadContext)
	assert.ErrorIs(t, a.Delete(nil), scheduler.ErrBadContext, "has a sub-context")
	assert.ErrorIs(t, sub.Delete(sub), scheduler.ErrBadContext, "inherits from itself")
	assert.ErrorIs(t, sub.Delete(gone), scheduler.ErrBadContext, "deleted inheritor")
	assert.ErrorIs(t, sub.Delete(foreign), scheduler.ErrBadContext, "foreign inheritor")
	assert.ErrorIs(t, gone.Delete(nil), scheduler.ErrContextDeleted)
	assert.ErrorIs(t, a.SetInheritor(sub), scheduler.ErrBadContext)
	_, err = gone.NewContext("x")
	assert.ErrorIs(t, err, scheduler.ErrContextDeleted)
	err = s.Submit(testCtx(t), clEmpty, scheduler.InContext(foreign))
	assert.ErrorIs(t, err, scheduler.ErrBadContext)
	// Nothing changed.
	assert.Equal(t, []*scheduler.Context{s.Global(), a, sub}, s.Contexts())
	assert.Equal(t, []int{0}, a.Workers())
}

func TestContextFinishedSubmitting(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(3))
	a, err := s.NewContext("a", scheduler.ContextWorkers(0, 1))
	require.NoError(t, err)
	b, err := s.NewContext("b", scheduler.ContextWorkers(2))
	require.NoError(t, err)
	require.NoError(t, a.SetInheritor(b))
	gate := make(chan struct{})
	var ran atomic.Int64
	cl := &scheduler.Codelet{Name: "gated", CPU: func(*scheduler.Call) error { <-gate; ran.Add(1); return nil }}
	for i := 0; i < 8; i++ {
		require.NoError(t, s.Submit(ctx, cl, scheduler.InContext(a)))
	}
	a.FinishedSubmitting()
	require.ErrorIs(t, s.Submit(ctx, cl, scheduler.InContext(a)), scheduler.ErrContextStopped)
	assert.Equal(t, []int{0, 1}, a.Workers(), "workers stay while tasks remain")
	close(gate)
	require.NoError(t, a.WaitAll(ctx))
	assert.Equal(t, int64(8), ran.Load())
	eventually(t, 5*time.Second, func() bool { return len(a.Workers()) == 0 }, "a's workers move to b")
	assert.Equal(t, []int{0, 1, 2}, b.Workers())
	eventually(t, 5*time.Second, func() bool {
		n := 0
		for _, r := range s.Resizes() {
			// From is "a", or "global" for a worker that had not
			// applied its move to a yet: moves posted to a worker
			// before its next safe point are applied as one.
			if r.Reason == "finished" && r.To == "b" && (r.Worker == 0 || r.Worker == 1) {
				n++
			}
		}
		return n == 2
	}, "resizes recorded")
}

func TestContextNested(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(4))
	p, err := s.NewContext("p", scheduler.ContextWorkers(0, 1, 2))
	require.NoError(t, err)
	c1, err := p.NewContext("c1", scheduler.ContextWorkers(0))
	require.NoError(t, err)
	c2, err := p.NewContext("c2", scheduler.ContextWorkers(1), scheduler.ContextPolicy("eager"))
	require.NoError(t, err)
	_, err = p.NewContext("x", scheduler.ContextWorkers(3))
	require.ErrorIs(t, err, scheduler.ErrBadWorker, "worker 3 is not in p")
	_, err = c1.NewContext("y", scheduler.ContextWorkers(1))
	require.ErrorIs(t, err, scheduler.ErrWorkerBusy, "worker 1 is in c2")
	assert.Equal(t, []int{0, 1, 2}, p.Workers())
	assert.Equal(t, []*scheduler.Context{c1, c2}, p.Children())

	r1, r2, rp := newRanOn(), newRanOn(), newRanOn()
	gate := make(chan struct{})
	inner := r1.codelet("c1", 0)
	gated := &scheduler.Codelet{Name: "gated", CPU: func(c *scheduler.Call) error { <-gate; return inner.CPU(c) }}
	require.NoError(t, s.Submit(ctx, gated, scheduler.InContext(c1)))
	for i := 0; i < 100; i++ {
		require.NoError(t, s.Submit(ctx, r1.codelet("c1", 0), scheduler.InContext(c1)))
		require.NoError(t, s.Submit(ctx, r2.codelet("c2", 0), scheduler.InContext(c2)))
		require.NoError(t, s.Submit(ctx, rp.codelet("p", 50*time.Microsecond), scheduler.InContext(p)))
	}
	require.NoError(t, c2.WaitAll(ctx))
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, p.WaitAll(short), context.DeadlineExceeded, "p waits for its sub-contexts' tasks")
	close(gate)
	require.NoError(t, p.WaitAll(ctx))
	assert.Equal(t, int64(101), r1.n.Load())
	assert.Equal(t, []int{0}, r1.workers())
	assert.Equal(t, []int{1}, r2.workers())
	assert.Subset(t, []int{0, 1, 2}, rp.workers(), "p's tasks run on p's workers, including its sub-contexts'")

	// Moving within p, and out of it.
	require.NoError(t, s.MoveWorkers(c2, c1, 1))
	assert.Equal(t, []int{0, 1}, c1.Workers())
	require.NoError(t, p.RemoveWorkers(0))
	assert.Equal(t, []int{1}, c1.Workers())
	assert.Equal(t, []int{1, 2}, p.Workers())
	r3 := newRanOn()
	for i := 0; i < 100; i++ {
		require.NoError(t, s.Submit(ctx, r3.codelet("c1", 0), scheduler.InContext(c1)))
	}
	require.NoError(t, c1.WaitAll(ctx))
	assert.Equal(t, []int{1}, r3.workers())
	require.NoError(t, c1.Delete(c2))
	waitDeleted(t, c1)
	require.NoError(t, c2.Delete(nil))
	waitDeleted(t, c2)
	assert.Equal(t, []int{1, 2}, p.Workers(), "sub-contexts' workers go back to p")
	require.NoError(t, p.Delete(nil))
	waitDeleted(t, p)
	assert.Equal(t, []*scheduler.Context{s.Global()}, s.Contexts())
}

func TestContextCluster(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(3))
	cl, err := s.NewContext("cluster", scheduler.ContextWorkers(2, 1), scheduler.ContextPolicy("none"))
	require.NoError(t, err)
	assert.Equal(t, "none", cl.PolicyName())
	_, err = cl.NewContext("sub")
	require.ErrorIs(t, err, scheduler.ErrBadContext)
	eventually(t, 5*time.Second, func() bool { return len(s.Resizes()) == 2 }, "both workers joined")
	r := newRanOn()
	var sizes sync.Map
	inner := r.codelet("omp", 200*time.Microsecond)
	region := &scheduler.Codelet{Name: "region", CPU: func(c *scheduler.Call) error {
		sizes.Store(len(c.Task.Context.Workers()), true)
		return inner.CPU(c)
	}}
	rg := newRanOn()
	for i := 0; i < 20; i++ {
		require.NoError(t, s.Submit(ctx, region, scheduler.InContext(cl)))
		require.NoError(t, s.Submit(ctx, rg.codelet("global", 100*time.Microsecond)))
	}
	require.NoError(t, s.WaitAll(ctx))
	assert.Equal(t, []int{1}, r.workers(), "a cluster's tasks run on its first worker")
	assert.Equal(t, int64(1), r.max.Load(), "one at a time")
	_, ok := sizes.Load(2)
	assert.True(t, ok, "the task sees the cluster's two workers")
	assert.Equal(t, []int{0}, rg.workers(), "the cluster's workers take no other tasks")
	// Removing the master hands the cluster to the next worker.
	require.NoError(t, cl.RemoveWorkers(1))
	r2 := newRanOn()
	for i := 0; i < 5; i++ {
		require.NoError(t, s.Submit(ctx, r2.codelet("omp", 0), scheduler.InContext(cl)))
	}
	require.NoError(t, cl.WaitAll(ctx))
	assert.Equal(t, []int{2}, r2.workers())
}

// TestContextClusterFirstWorkerFromTheStart: a cluster's tasks run on its
// first worker even when the other workers join it before the first does
// (they reach their safe points first): the master is the first worker
// given to the cluster, not the first to join it.
func TestContextClusterFirstWorkerFromTheStart(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(4), scheduler.WithPolicy("eager"))
	// Occupy every worker with a task of its own gate.
	var gates [4]chan struct{}
	for i := range gates {
		gates[i] = make(chan struct{})
	}
	started := make(chan int, 4)
	hold := &scheduler.Codelet{Name: "hold", CPU: func(c *scheduler.Call) error {
		started <- c.Worker
		<-gates[c.Worker]
		return nil
	}}
	for range gates {
		require.NoError(t, s.Submit(ctx, hold))
	}
	for range gates {
		<-started
	}
	cl, err := s.NewContext("cluster", scheduler.ContextWorkers(1, 2, 3), scheduler.ContextPolicy("none"))
	require.NoError(t, err)
	// Workers 2 and 3 join the cluster; worker 1 is still busy.
	close(gates[2])
	close(gates[3])
	waitResize(t, s, 2, "add")
	waitResize(t, s, 3, "add")
	r := newRanOn()
	for i := 0; i < 5; i++ {
		require.NoError(t, s.Submit(ctx, r.codelet("omp", 0), scheduler.InContext(cl)))
	}
	close(gates[1])
	close(gates[0])
	require.NoError(t, s.WaitAll(ctx))
	assert.Equal(t, []int{1}, r.workers(), "the cluster's tasks wait for its first worker")

	// Tasks submitted right after NewContext, before any worker joined.
	for trial := 0; trial < 10; trial++ {
		s := newSched(t, scheduler.WithWorkers(4))
		cl, err := s.NewContext("cluster", scheduler.ContextWorkers(3, 1, 2), scheduler.ContextPolicy("none"))
		require.NoError(t, err)
		r := newRanOn()
		for i := 0; i < 10; i++ {
			require.NoError(t, s.Submit(ctx, r.codelet("omp", 0), scheduler.InContext(cl)))
		}
		require.NoError(t, s.WaitAll(ctx))
		assert.Equal(t, []int{1}, r.workers(), "trial %d", trial)
		assert.Equal(t, int64(1), r.max.Load(), "trial %d: one at a time", trial)
		require.NoError(t, s.Close())
	}
}

// TestContextResizesInOrder: Resizes lists the changes in the order
// applied, and their times agree with that order, also when many
// workers apply theirs at once.
func TestContextResizesInOrder(t *testing.T) {
	ctx := testCtx(t)
	for trial := 0; trial < 20; trial++ {
		s := newSched(t, scheduler.WithWorkers(8))
		a, err := s.NewContext("A", scheduler.ContextSize(4))
		require.NoError(t, err)
		b, err := s.NewContext("B", scheduler.ContextSize(4))
		require.NoError(t, err)
		require.NoError(t, s.MoveWorkers(a, b, 0, 1))
		require.NoError(t, s.MoveWorkers(b, a, 4, 5))
		require.NoError(t, s.Submit(ctx, clEmpty))
		require.NoError(t, s.WaitAll(ctx))
		require.NoError(t, s.Close()) // every worker applies its changes
		rs := s.Resizes()
		require.NotEmpty(t, rs)
		for i := 1; i < len(rs); i++ {
			require.LessOrEqual(t, rs[i-1].At, rs[i].At, "trial %d: %v then %v", trial, rs[i-1], rs[i])
		}
	}
}

// TestTaskContextSetAtSubmission: submission sets Task.Context to the
// context used, the global one included, with or without other
// contexts, and the task's code sees it.
func TestTaskContextSetAtSubmission(t *testing.T) {
	ctx := testCtx(t)
	var seen sync.Map
	show := &scheduler.Codelet{Name: "show", CPU: func(c *scheduler.Call) error {
		seen.Store(c.Arg, c.Task.Context)
		return nil
	}}
	s := newSched(t, scheduler.WithWorkers(2))
	g := s.Global()
	require.NoError(t, s.Submit(ctx, show, scheduler.WithArg("plain, no contexts")))
	nt := scheduler.NewTask(show, scheduler.WithArg("NewTask, no contexts"))
	require.NoError(t, s.SubmitTask(ctx, nt))
	require.NoError(t, s.WaitAll(ctx))
	assert.Same(t, g, nt.Context)

	a, err := s.NewContext("A", scheduler.ContextWorkers(0))
	require.NoError(t, err)
	require.NoError(t, s.Submit(ctx, show, scheduler.WithArg("plain")))
	require.NoError(t, s.Submit(ctx, show, scheduler.WithArg("InContext global"), scheduler.InContext(g)))
	require.NoError(t, s.Submit(ctx, show, scheduler.WithArg("InContext A"), scheduler.InContext(a)))
	require.NoError(t, s.Submit(scheduler.Within(ctx, a), show, scheduler.WithArg("Within A")))
	b := s.NewBatch()
	require.NoError(t, b.Submit(ctx, show, scheduler.WithArg("batch")))
	b.Flush()
	ta := scheduler.NewTask(show, scheduler.WithArg("NewTask Within A"))
	require.NoError(t, s.SubmitTask(scheduler.Within(ctx, a), ta))
	require.NoError(t, s.WaitAll(ctx))
	assert.Same(t, a, ta.Context)

	want := map[string]*scheduler.Context{
		"plain, no contexts": g, "NewTask, no contexts": g, "plain": g, "InContext global": g,
		"InContext A": a, "Within A": a, "batch": g, "NewTask Within A": a,
	}
	for arg, c := range want {
		got, ok := seen.Load(arg)
		if assert.True(t, ok, "%s ran", arg) {
			assert.Same(t, c, got, arg)
		}
	}

	// A refused submission leaves Task.Context as it was.
	a.StopSubmission()
	tr := scheduler.NewTask(show)
	require.ErrorIs(t, s.SubmitTask(scheduler.Within(ctx, a), tr), scheduler.ErrContextStopped)
	assert.Nil(t, tr.Context)
}

func TestContextErrorsReportedPerContext(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	a, err := s.NewContext("a", scheduler.ContextWorkers(0))
	require.NoError(t, err)
	b, err := s.NewContext("b", scheduler.ContextWorkers(1))
	require.NoError(t, err)
	boom := errors.New("boom")
	fail := &scheduler.Codelet{Name: "fail", CPU: func(*scheduler.Call) error { return boom }}
	require.NoError(t, s.Submit(ctx, fail, scheduler.InContext(a)))
	require.NoError(t, s.Submit(ctx, clEmpty, scheduler.InContext(b)))
	require.NoError(t, b.WaitAll(ctx), "b's WaitAll does not report a's failure")
	err = a.WaitAll(ctx)
	require.ErrorIs(t, err, boom)
	require.NoError(t, s.Submit(ctx, fail, scheduler.InContext(b)))
	require.ErrorIs(t, s.WaitAll(ctx), boom, "the global WaitAll reports every context's failures")
	require.NoError(t, s.WaitAll(ctx))
}

func TestContextTeams(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(4))
	c, err := s.NewContext("c", scheduler.ContextWorkers(1, 2))
	require.NoError(t, err)
	var mu sync.Mutex
	seen := map[int]bool{}
	spmd := &scheduler.Codelet{Name: "spmd", Parallel: scheduler.SPMD, CPU: func(call *scheduler.Call) error {
		mu.Lock()
		seen[call.Worker] = true
		mu.Unlock()
		return nil
	}}
	for i := 0; i < 10; i++ {
		require.NoError(t, s.Submit(ctx, spmd, scheduler.WithTeam(2), scheduler.InContext(c)))
	}
	require.NoError(t, s.WaitAll(ctx))
	assert.Equal(t, map[int]bool{1: true, 2: true}, seen, "team members come from the context")
	err = s.Submit(ctx, spmd, scheduler.WithTeam(3), scheduler.InContext(c))
	require.ErrorIs(t, err, scheduler.ErrBadTeam, "a team larger than the context")
	assert.Zero(t, c.Pending())

	// It is the context's workers that count, those moving there too:
	// an empty context refuses a team (it keeps its other tasks)...
	e, err := s.NewContext("e")
	require.NoError(t, err)
	err = s.Submit(ctx, spmd, scheduler.WithTeam(2), scheduler.InContext(e))
	require.ErrorIs(t, err, scheduler.ErrBadTeam, "a team in an empty context")
	assert.Contains(t, err.Error(), `context "e" has 0 CPU workers`)
	assert.Zero(t, e.MinWorkers())
	// ... and accepts it once given workers, before they joined.
	require.NoError(t, e.AddWorkers(0, 3))
	require.NoError(t, s.Submit(ctx, spmd, scheduler.WithTeam(2), scheduler.InContext(e)))
	require.NoError(t, e.WaitAll(ctx))
}

func TestContextResizesInTrace(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2), scheduler.WithStats(true))
	a, err := s.NewContext("a", scheduler.ContextWorkers(0, 1))
	require.NoError(t, err)
	b, err := s.NewContext("b")
	require.NoError(t, err)
	r := newRanOn()
	for i := 0; i < 20; i++ {
		require.NoError(t, s.Submit(ctx, r.codelet("work", 100*time.Microsecond), scheduler.InContext(a)))
	}
	require.NoError(t, a.WaitAll(ctx))
	require.NoError(t, s.MoveWorkers(a, b, 1))
	for i := 0; i < 20; i++ {
		require.NoError(t, s.Submit(ctx, r.codelet("work", 100*time.Microsecond), scheduler.InContext(b)))
	}
	require.NoError(t, s.WaitAll(ctx))
	var buf strings.Builder
	require.NoError(t, s.WriteTrace(&buf))
	var tr struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Cat  string         `json:"cat"`
			Ph   string         `json:"ph"`
			Pid  int            `json:"pid"`
			Tid  int            `json:"tid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal([]byte(buf.String()), &tr))
	spans := map[int][]string{}
	resizes := 0
	for _, e := range tr.TraceEvents {
		switch e.Cat {
		case "context":
			spans[e.Tid] = append(spans[e.Tid], e.Name)
		case "resize":
			resizes++
			assert.Contains(t, []string{"add", "move"}, e.Args["reason"])
		}
	}
	assert.Equal(t, len(s.Resizes()), resizes, "one instant event per resize")
	assert.Equal(t, []string{"global", "a"}, spans[0])
	assert.Equal(t, []string{"global", "a", "b"}, spans[1])
	var svg strings.Builder
	require.NoError(t, s.WriteGantt(&svg))
	for _, want := range []string{"context a", "context b", "<title>context b</title>"} {
		assert.Contains(t, svg.String(), want)
	}
}

// waitDeleted waits, at most 10 s, for c to be deleted.
func waitDeleted(t *testing.T, c *scheduler.Context) {
	t.Helper()
	select {
	case <-c.Deleted():
	case <-time.After(10 * time.Second):
		t.Fatalf("%v was not deleted", c)
	}
}
