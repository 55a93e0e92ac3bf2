package hypervisor_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/hypervisor"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func noEnv(string) string { return "" }

func newSched(t *testing.T, workers int) *scheduler.Scheduler {
	t.Helper()
	s, err := scheduler.New(testCtx(t), scheduler.WithWorkers(workers), scheduler.WithPerfModelDir(""), scheduler.WithGetenv(noEnv))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// work returns a codelet whose tasks take d of wall time (sleeping, so
// that speeds do not depend on how loaded the test machine is) and
// declare flops each.
func work(name string, d time.Duration, flops float64) *scheduler.Codelet {
	return &scheduler.Codelet{
		Name:  name,
		CPU:   func(*scheduler.Call) error { time.Sleep(d); return nil },
		Flops: func(*scheduler.Task) float64 { return flops },
	}
}

func newContexts(t *testing.T, s *scheduler.Scheduler, a, b []int) (*scheduler.Context, *scheduler.Context) {
	t.Helper()
	ca, err := s.NewContext("a", scheduler.ContextWorkers(a...))
	require.NoError(t, err)
	cb, err := s.NewContext("b", scheduler.ContextWorkers(b...))
	require.NoError(t, err)
	return ca, cb
}

func submitN(t *testing.T, s *scheduler.Scheduler, c *scheduler.Context, cl *scheduler.Codelet, n int, args ...scheduler.Arg) {
	t.Helper()
	ctx := testCtx(t)
	for i := 0; i < n; i++ {
		require.NoError(t, s.Submit(ctx, cl, append([]scheduler.Arg{scheduler.InContext(c)}, args...)...))
	}
}

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

// directions counts the resizes by "from->to".
func directions(rs []hypervisor.Resize) map[string]int {
	m := map[string]int{}
	for _, r := range rs {
		m[r.From+"->"+r.To]++
	}
	return m
}

func TestIdleMovesIdleWorkersToLoadedContext(t *testing.T) {
	s := newSched(t, 3)
	a, b := newContexts(t, s, []int{0, 1}, []int{2})
	core, logs := observer.New(zap.InfoLevel)
	hv, err := hypervisor.New(s, hypervisor.WithPolicyName("idle"), hypervisor.WithMaxIdle(2*time.Millisecond),
		hypervisor.WithGetenv(noEnv), hypervisor.WithLogger(zap.New(core)))
	require.NoError(t, err)
	defer hv.Close()
	assert.Equal(t, hypervisor.TriggerIdle, hv.Trigger())
	require.NoError(t, hv.Register(a, hypervisor.Limits{}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{}))
	submitN(t, s, b, work("b", time.Millisecond, 1e6), 300)
	eventually(t, 20*time.Second, func() bool { return len(b.Workers()) == 3 }, "a's idle workers move to b")
	require.NoError(t, b.WaitAll(testCtx(t)))
	rs := hv.Resizes()
	assert.Equal(t, map[string]int{"a->b": 2}, directions(rs))
	for _, r := range rs {
		assert.Equal(t, hypervisor.TriggerIdle, r.Trigger)
		assert.Equal(t, "idle", r.Policy)
	}
	assert.Equal(t, len(rs), logs.FilterMessage("hypervisor resize").Len(), "every resize is logged")
	eventually(t, 10*time.Second, func() bool {
		n := 0
		for _, r := range s.Resizes() {
			if r.Reason == "hypervisor idle" {
				n++
			}
		}
		return n == 2
	}, "the scheduler records the hypervisor's resizes (they appear in its trace)")
}

func TestGflopsRateGivesWorkersToTheLargerContext(t *testing.T) {
	s := newSched(t, 4)
	a, b := newContexts(t, s, []int{0, 1}, []int{2, 3})
	hv, err := hypervisor.New(s, hypervisor.WithPolicyName("gflops_rate"), hypervisor.WithWindow(10*time.Millisecond),
		hypervisor.WithGetenv(noEnv))
	require.NoError(t, err)
	defer hv.Close()
	const f = 1e6
	const na, nb = 600, 60
	submitN(t, s, a, work("a", time.Millisecond, f), na)
	submitN(t, s, b, work("b", time.Millisecond, f), nb)
	// Registered once both have their work (a context without pending
	// work gives its workers away).
	require.NoError(t, hv.Register(a, hypervisor.Limits{TotalFlops: na * f}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{TotalFlops: nb * f}))
	// a has 10 times b's work: the workers go to a, and b's last one
	// joins it when b is done, while a still has work.
	var maxSpeed float64
	eventually(t, 30*time.Second, func() bool {
		maxSpeed = max(maxSpeed, hv.Counters(a).Speed)
		return len(a.Workers()) == 4
	}, "every worker ends in a")
	assert.Positive(t, a.Pending(), "a got them while it still had work")
	require.NoError(t, s.WaitAll(testCtx(t)))
	assert.Equal(t, map[string]int{"b->a": 2}, directions(hv.Resizes()))
	assert.InDelta(t, na*f, hv.Counters(a).Flops, 1)
	// Tasks of 1e6 flops taking at least 1 ms: at most 1 Gflop/s per
	// worker, so at most 4 Gflop/s for any context or worker.
	assert.Positive(t, maxSpeed, "a's instant speed was measured while it ran")
	assert.LessOrEqual(t, maxSpeed, 4e9)
	for id := range s.Workers() {
		assert.LessOrEqual(t, hv.Worker(id).Speed, 1.01e9, "worker %d", id)
	}
	assert.InDelta(t, nb*f, hv.Counters(b).Flops, 1)
}

func TestISpeedEqualizesSpeeds(t *testing.T) {
	s := newSched(t, 4)
	a, b := newContexts(t, s, []int{0}, []int{1, 2, 3})
	hv, err := hypervisor.New(s, hypervisor.WithPolicyName("ispeed"), hypervisor.WithWindow(15*time.Millisecond),
		hypervisor.WithSpeedGap(0.3), hypervisor.WithGetenv(noEnv))
	require.NoError(t, err)
	defer hv.Close()
	require.NoError(t, hv.Register(a, hypervisor.Limits{}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{}))
	submitN(t, s, a, work("a", time.Millisecond, 1e6), 400)
	submitN(t, s, b, work("b", time.Millisecond, 1e6), 400)
	// Equal work, speed 1 against 3: a worker moves from b to a, then
	// the speeds are equal and nothing moves.
	eventually(t, 30*time.Second, func() bool { return len(a.Workers()) == 2 }, "b gives a worker to a")
	require.NoError(t, s.WaitAll(testCtx(t)))
	rs := hv.Resizes()
	require.NotEmpty(t, rs)
	assert.Equal(t, "b", rs[0].From, "the first move goes from the fast context to the slow one: %v", rs)
	d := directions(rs)
	assert.Equal(t, 1, d["b->a"]-d["a->b"], "one worker moved in all: %v", d)
}

func TestThroughputTakesWorkersFromASerialContext(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, 4)
	a, b := newContexts(t, s, []int{0, 1, 2}, []int{3})
	hv, err := hypervisor.New(s, hypervisor.WithPolicyName("throughput"), hypervisor.WithWindow(15*time.Millisecond),
		hypervisor.WithGetenv(noEnv))
	require.NoError(t, err)
	defer hv.Close()
	require.NoError(t, hv.Register(a, hypervisor.Limits{}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{}))
	// a is a chain (one task at a time: extra workers add nothing), b
	// has independent tasks (each worker adds its speed).
	var x int
	h, err := s.RegisterValue(&x)
	require.NoError(t, err)
	chain := work("chain", time.Millisecond, 1e6)
	submitN(t, s, a, chain, 400, scheduler.RW(h))
	// b has more work than a: b never has to give a worker back.
	submitN(t, s, b, work("b", time.Millisecond, 1e6), 2000)
	eventually(t, 30*time.Second, func() bool { return len(b.Workers()) >= 3 }, "a gives b all but one worker")
	require.NoError(t, s.WaitAll(ctx))
	d := directions(hv.Resizes())
	assert.GreaterOrEqual(t, d["a->b"], 2, "%v", d)
	assert.Zero(t, d["b->a"], "%v", d)
}

func TestAppDrivenResizesWhenTheTaggedTaskRuns(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, 3)
	a, b := newContexts(t, s, []int{0, 1}, []int{2})
	pol := hypervisor.NewAppDriven()
	hv, err := hypervisor.New(s, hypervisor.WithPolicy(pol), hypervisor.WithGetenv(noEnv))
	require.NoError(t, err)
	defer hv.Close()
	assert.Equal(t, hypervisor.Trigger(0), hv.Trigger())
	require.NoError(t, hv.Register(a, hypervisor.Limits{}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{}))
	pol.OnTag(42, a, b, 1)
	submitN(t, s, a, work("before", 100*time.Microsecond, 1), 50)
	require.NoError(t, a.WaitAll(ctx))
	assert.Empty(t, hv.Resizes(), "nothing before the tagged task")
	gate := make(chan struct{})
	tagged := &scheduler.Codelet{Name: "tagged", CPU: func(*scheduler.Call) error { <-gate; return nil }}
	require.NoError(t, s.Submit(ctx, tagged, scheduler.InContext(a), scheduler.WithTag(42)))
	time.Sleep(5 * time.Millisecond)
	assert.Empty(t, hv.Resizes(), "nothing while it runs")
	close(gate)
	eventually(t, 10*time.Second, func() bool { return len(hv.Resizes()) == 1 }, "one resize after it")
	assert.Equal(t, map[string]int{"a->b": 1}, directions(hv.Resizes()))
	assert.Len(t, b.Workers(), 2)
	// Once only.
	require.NoError(t, s.Submit(ctx, clTag(), scheduler.InContext(a), scheduler.WithTag(42)))
	require.NoError(t, s.WaitAll(ctx))
	time.Sleep(5 * time.Millisecond)
	assert.Len(t, hv.Resizes(), 1)
}

func clTag() *scheduler.Codelet {
	return &scheduler.Codelet{Name: "t", CPU: func(*scheduler.Call) error { return nil }}
}

// countingPolicy is a custom policy: it counts every hook and, when its
// hook sees the task tagged 7 complete, moves one worker of a to b.
type countingPolicy struct {
	pushed, popped, executed, idleCycles, idleEnds atomic.Int64
	resizes                                        atomic.Int64
	a, b                                           *scheduler.Context
}

func (p *countingPolicy) Name() string { return "counting" }

func (p *countingPolicy) TaskPushed(*scheduler.Context, *scheduler.Task) bool {
	p.pushed.Add(1)
	return false
}

func (p *countingPolicy) TaskPopped(*scheduler.Context, *scheduler.Task, int) bool {
	p.popped.Add(1)
	return false
}

func (p *countingPolicy) IdleCycle(*scheduler.Context, int, time.Duration) bool {
	p.idleCycles.Add(1)
	return false
}

func (p *countingPolicy) IdleEnd(*scheduler.Context, int, time.Duration) bool {
	p.idleEnds.Add(1)
	return false
}

func (p *countingPolicy) TaskExecuted(_ *scheduler.Context, t *scheduler.Task, _ int, _ time.Duration) bool {
	p.executed.Add(1)
	return t.Tag == 7
}

func (p *countingPolicy) Resize(v *hypervisor.View) []hypervisor.Move {
	p.resizes.Add(1)
	for _, w := range v.Workers {
		if w.Context >= 0 && v.Contexts[w.Context].Context == p.a {
			for i, c := range v.Contexts {
				if c.Context == p.b {
					return []hypervisor.Move{{Worker: w.ID, To: i}}
				}
			}
		}
	}
	return nil
}

func TestCustomPolicyHooksAndCounters(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, 3)
	a, b := newContexts(t, s, []int{0, 1}, []int{2})
	pol := &countingPolicy{a: a, b: b}
	hv, err := hypervisor.New(s, hypervisor.WithPolicy(pol), hypervisor.WithGetenv(noEnv))
	require.NoError(t, err)
	defer hv.Close()
	require.NoError(t, hv.Register(a, hypervisor.Limits{}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{}))
	const n, f = 300, 250.0
	time.Sleep(10 * time.Millisecond) // the workers idle, then find work
	submitN(t, s, a, work("a", 0, f), n)
	submitN(t, s, b, work("b", 0, f), n)
	require.NoError(t, s.Submit(ctx, work("g", 0, f)))
	require.NoError(t, s.Submit(ctx, clTag(), scheduler.InContext(a), scheduler.WithTag(7)))
	require.NoError(t, s.WaitAll(ctx))
	total := int64(2*n + 2)
	// TaskExecuted runs after the task completes, so WaitAll may return
	// just before the last hook.
	eventually(t, 10*time.Second, func() bool { return pol.executed.Load() == total }, "every task executed is seen")
	assert.Equal(t, total, pol.pushed.Load())
	assert.Equal(t, total, pol.popped.Load())
	assert.Positive(t, pol.idleCycles.Load())
	assert.Positive(t, pol.idleEnds.Load())
	assert.Equal(t, int64(1), pol.resizes.Load(), "the hook asked for one resize")
	eventually(t, 10*time.Second, func() bool { return len(b.Workers()) == 2 }, "the move is applied")

	ca, cb, cg := hv.Counters(a), hv.Counters(b), hv.Counters(s.Global())
	assert.Equal(t, int64(n+1), ca.Done)
	assert.Equal(t, int64(n+1), ca.Pushed)
	assert.Equal(t, int64(n+1), ca.Popped)
	assert.Equal(t, int64(n), cb.Done)
	assert.Equal(t, int64(1), cg.Done)
	assert.InDelta(t, n*f, ca.Flops, 1e-9)
	assert.InDelta(t, n*f, cb.Flops, 1e-9)
	var done int64
	var flops float64
	var idle time.Duration
	for id := range s.Workers() {
		w := hv.Worker(id)
		done += w.Done
		flops += w.Flops
		idle += w.Idle
	}
	assert.Equal(t, total, done)
	assert.InDelta(t, float64(2*n+1)*f, flops, 1e-9)
	assert.Positive(t, idle)
	assert.Zero(t, hv.Worker(99))
}

func TestOptionsAndEnvironment(t *testing.T) {
	s := newSched(t, 2)
	env := func(kv map[string]string) hypervisor.Option {
		return hypervisor.WithGetenv(func(k string) string { return kv[k] })
	}
	hv, err := hypervisor.New(s, env(map[string]string{"PZ_HYPERVISOR_POLICY": "throughput", "PZ_HYPERVISOR_TRIGGER": "idle,speed"}))
	require.NoError(t, err)
	assert.Equal(t, "throughput", hv.Policy().Name())
	assert.Equal(t, hypervisor.TriggerIdle|hypervisor.TriggerSpeed, hv.Trigger())
	require.NoError(t, hv.Close())
	require.NoError(t, hv.Close(), "idempotent")

	hv, err = hypervisor.New(s, hypervisor.WithTrigger(hypervisor.TriggerSpeed), hypervisor.WithPolicyName("idle"),
		env(map[string]string{"PZ_HYPERVISOR_POLICY": "throughput", "PZ_HYPERVISOR_TRIGGER": "idle"}))
	require.NoError(t, err)
	assert.Equal(t, "idle", hv.Policy().Name(), "options beat the environment")
	assert.Equal(t, hypervisor.TriggerSpeed, hv.Trigger())
	require.NoError(t, hv.Close())

	for _, p := range hypervisor.Policies() {
		hv, err := hypervisor.New(s, hypervisor.WithPolicyName(p), env(nil))
		require.NoError(t, err, p)
		assert.Equal(t, p, hv.Policy().Name())
		require.NoError(t, hv.Close())
	}

	bad := []map[string]string{
		{"PZ_HYPERVISOR_POLICY": "bogus"},
		{"PZ_HYPERVISOR_TRIGGER": "sometimes"},
		{"PZ_HYPERVISOR_MAX_IDLE": "soon"},
		{"PZ_HYPERVISOR_WINDOW": "-1ms"},
		{"PZ_HYPERVISOR_SPEED_GAP": "x"},
	}
	for _, kv := range bad {
		_, err := hypervisor.New(s, env(kv))
		assert.ErrorIs(t, err, hypervisor.ErrBadOption, "%v", kv)
	}
	_, err = hypervisor.New(s, hypervisor.WithWorkerMaxIdle(0, -time.Millisecond), env(nil))
	assert.ErrorIs(t, err, hypervisor.ErrBadOption)
	_, err = hypervisor.New(s, hypervisor.WithMaxIdle(-time.Millisecond), env(nil))
	assert.ErrorIs(t, err, hypervisor.ErrBadOption)

	tr, err := hypervisor.ParseTrigger("both")
	require.NoError(t, err)
	assert.Equal(t, "idle,speed", tr.String())
	assert.Equal(t, "none", hypervisor.Trigger(0).String())
}

func TestRegisterBadInput(t *testing.T) {
	s := newSched(t, 2)
	other := newSched(t, 1)
	foreign, err := other.NewContext("foreign")
	require.NoError(t, err)
	c, err := s.NewContext("c")
	require.NoError(t, err)
	gone, err := s.NewContext("gone")
	require.NoError(t, err)
	require.NoError(t, gone.Delete(nil))
	waitDeleted(t, gone)
	hv, err := hypervisor.New(s, hypervisor.WithGetenv(noEnv))
	require.NoError(t, err)
	defer hv.Close()
	assert.ErrorIs(t, hv.Register(foreign, hypervisor.Limits{}), hypervisor.ErrBadContext)
	assert.ErrorIs(t, hv.Register(nil, hypervisor.Limits{}), hypervisor.ErrBadContext)
	assert.ErrorIs(t, hv.Register(gone, hypervisor.Limits{}), hypervisor.ErrBadContext)
	assert.ErrorIs(t, hv.Register(c, hypervisor.Limits{Min: 3, Max: 2}), hypervisor.ErrBadContext)
	assert.ErrorIs(t, hv.Register(c, hypervisor.Limits{Min: -1}), hypervisor.ErrBadContext)
	require.NoError(t, hv.Register(c, hypervisor.Limits{Max: 1}))
	assert.Empty(t, hv.ResizeNow(), "nothing to do")
}

func TestLimitsAreEnforced(t *testing.T) {
	// A policy that asks for everything: move every worker of a to b.
	s := newSched(t, 4)
	a, b := newContexts(t, s, []int{0, 1, 2}, []int{3})
	greedy := greedyPolicy{}
	hv, err := hypervisor.New(s, hypervisor.WithPolicy(greedy), hypervisor.WithGetenv(noEnv))
	require.NoError(t, err)
	defer hv.Close()
	require.NoError(t, hv.Register(a, hypervisor.Limits{Min: 1}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{Max: 2}))
	rs := hv.ResizeNow()
	assert.Len(t, rs, 1, "b's max lets one worker in: %v", rs)
	assert.Len(t, b.Workers(), 2)
	require.NoError(t, hv.Register(b, hypervisor.Limits{}))
	rs = hv.ResizeNow()
	assert.Len(t, rs, 1, "a's min keeps one worker: %v", rs)
	assert.Equal(t, 1, len(a.Workers()))
}

type greedyPolicy struct{}

func (greedyPolicy) Name() string { return "greedy" }

func (greedyPolicy) Resize(v *hypervisor.View) []hypervisor.Move {
	var moves []hypervisor.Move
	for _, w := range v.Workers {
		if w.Context == 0 {
			moves = append(moves, hypervisor.Move{Worker: w.ID, To: 1})
		}
	}
	moves = append(moves, hypervisor.Move{Worker: 99, To: 1}, hypervisor.Move{Worker: 0, To: 7})
	return moves
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
