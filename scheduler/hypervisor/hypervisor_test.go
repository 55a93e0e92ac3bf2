package hypervisor_test

import (
	"context"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
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

// resizeEvents returns an option that reports every resize on the
// returned channel (buffered generously: a test reads what it expects).
func resizeEvents() (hypervisor.Option, <-chan hypervisor.Resize) {
	ch := make(chan hypervisor.Resize, 1024)
	return hypervisor.WithOnResize(func(r hypervisor.Resize) { ch <- r }), ch
}

// nextResize waits for the next resize, at most d (a failure guard, not
// a wait for time to pass).
func nextResize(t *testing.T, ch <-chan hypervisor.Resize, d time.Duration, msg string) hypervisor.Resize {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("no resize after %v: %s", d, msg)
		return hypervisor.Resize{}
	}
}

// waitFor waits for ch to be closed or to deliver, at most d.
func waitFor[T any](t *testing.T, ch <-chan T, d time.Duration, msg string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("timed out after %v: %s", d, msg)
		var z T
		return z
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
	onResize, resized := resizeEvents()
	hv, err := hypervisor.New(s, hypervisor.WithPolicyName("idle"), hypervisor.WithMaxIdle(2*time.Millisecond),
		hypervisor.WithGetenv(noEnv), hypervisor.WithLogger(zap.New(core)), onResize)
	require.NoError(t, err)
	defer hv.Close()
	assert.Equal(t, hypervisor.TriggerIdle, hv.Trigger())
	require.NoError(t, hv.Register(a, hypervisor.Limits{}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{}))
	submitN(t, s, b, work("b", time.Millisecond, 1e6), 300)
	for range 2 {
		r := nextResize(t, resized, 20*time.Second, "a's idle workers move to b")
		assert.Equal(t, "a->b", r.From+"->"+r.To)
	}
	assert.Len(t, b.Workers(), 3)
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
	// worker, and 4 for a context, over a long time. A sampling window
	// of W >= 10 ms counts the flops of the tasks that end in it, and one
	// of a worker's may have begun up to 1 ms before the window did: at
	// most 1 + 1ms/W = 1.1 Gflop/s per worker in a window.
	const perWorker = 1e9 * (1 + float64(time.Millisecond)/float64(10*time.Millisecond))
	assert.Positive(t, maxSpeed, "a's instant speed was measured while it ran")
	assert.LessOrEqual(t, maxSpeed, 4*perWorker)
	for id := range s.Workers() {
		assert.LessOrEqual(t, hv.Worker(id).Speed, perWorker, "worker %d", id)
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
	submitN(t, s, a, work("a", time.Millisecond, 1e6), 400)
	submitN(t, s, b, work("b", time.Millisecond, 1e6), 400)
	// Registered once both have their work (a context without pending
	// work gives its workers away: b, which finishes first, keeps 2 so
	// that only the speeds move workers).
	require.NoError(t, hv.Register(a, hypervisor.Limits{}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{Min: 2}))
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

// A context that has finished its work gives its workers (beyond
// Limits.Min) to one with pending work, under either trigger: the
// trial's "hv resizes: 0" with a worker idle while the other context
// had hundreds of tasks.
func TestISpeedMovesTheWorkersOfAContextWithoutWork(t *testing.T) {
	for _, trig := range []hypervisor.Trigger{hypervisor.TriggerSpeed, hypervisor.TriggerIdle} {
		t.Run(trig.String(), func(t *testing.T) {
			ctx := testCtx(t)
			s := newSched(t, 4)
			a, b := newContexts(t, s, []int{0, 1, 2}, []int{3})
			onResize, resized := resizeEvents()
			hv, err := hypervisor.New(s, hypervisor.WithPolicyName("ispeed"), hypervisor.WithTrigger(trig),
				hypervisor.WithWindow(5*time.Millisecond), hypervisor.WithMaxIdle(2*time.Millisecond),
				hypervisor.WithGetenv(noEnv), onResize)
			require.NoError(t, err)
			defer hv.Close()
			// b's tasks wait for gate: b has pending work (and no
			// measured speed) until the test ends.
			gate := make(chan struct{})
			var open sync.Once
			release := func() { open.Do(func() { close(gate) }) }
			t.Cleanup(release) // before the scheduler's Close, also on failure
			blocked := &scheduler.Codelet{Name: "blocked", CPU: func(*scheduler.Call) error { <-gate; return nil },
				Flops: func(*scheduler.Task) float64 { return 1e6 }}
			submitN(t, s, b, blocked, 4)
			submitN(t, s, a, work("a", 100*time.Microsecond, 1e6), 30)
			require.NoError(t, hv.Register(a, hypervisor.Limits{Min: 1}))
			require.NoError(t, hv.Register(b, hypervisor.Limits{}))
			require.NoError(t, a.WaitAll(ctx))
			for range 2 {
				r := nextResize(t, resized, 10*time.Second, "a, done, gives b its workers but Limits.Min")
				assert.Equal(t, "a->b", r.From+"->"+r.To)
				assert.Equal(t, trig, r.Trigger)
			}
			eventually(t, 10*time.Second, func() bool { return len(b.Workers()) == 3 }, "the moved workers reach b")
			assert.Len(t, a.Workers(), 1, "a keeps Limits.Min")
			assert.Positive(t, b.Pending(), "b got them while it had work")
			release()
			require.NoError(t, s.WaitAll(ctx))
			assert.Equal(t, map[string]int{"a->b": 2}, directions(hv.Resizes()))
		})
	}
}

// ISpeed shares the workers of a context without pending work among
// the contexts with work, the slowest first, counting each newcomer's
// speed.
func TestISpeedSharesIdleWorkersBySpeed(t *testing.T) {
	s := newSched(t, 7)
	var cs []*scheduler.Context
	for i, name := range []string{"done", "x", "y"} {
		c, err := s.NewContext(name, scheduler.ContextWorkers([][]int{{0, 1, 2}, {3}, {4, 5, 6}}[i]...))
		require.NoError(t, err)
		cs = append(cs, c)
	}
	v := &hypervisor.View{Trigger: hypervisor.TriggerSpeed, Contexts: []hypervisor.ContextView{
		{Context: cs[0], Name: "done", Workers: []int{0, 1, 2}, Speed: 5e9, WorkerSpeed: 1e9},
		{Context: cs[1], Name: "x", Workers: []int{3}, Pending: 10, Speed: 1e9, WorkerSpeed: 1e9},
		{Context: cs[2], Name: "y", Workers: []int{4, 5, 6}, Pending: 10, Speed: 2.5e9, WorkerSpeed: 0.8e9},
	}}
	for id := range 7 {
		v.Workers = append(v.Workers, hypervisor.WorkerView{ID: id, Context: []int{0, 0, 0, 1, 2, 2, 2}[id]})
	}
	v.Workers[0].Idle = time.Second // the longest idle goes first
	p := &hypervisor.ISpeed{Gap: 0.2}
	// x: 1e9, then 2e9 and 3e9 with its newcomers; y: 2.5e9.
	assert.Equal(t, []hypervisor.Move{{Worker: 0, To: 1}, {Worker: 2, To: 1}, {Worker: 1, To: 2}}, p.Resize(v))
	// With Limits.Min 2, done gives one worker; with a Max of 1, x
	// takes none.
	v.Contexts[0].Limits.Min = 2
	v.Contexts[1].Limits.Max = 1
	assert.Equal(t, []hypervisor.Move{{Worker: 0, To: 2}}, p.Resize(v))
	// No context with pending work: nothing moves.
	v.Contexts[1].Pending, v.Contexts[2].Pending = 0, 0
	assert.Empty(t, p.Resize(v))
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

// executedHooks wraps a policy's hooks to report each task executed
// (after the wrapped hook returned) on a channel.
type executedHooks struct {
	*hypervisor.AppDriven
	executed chan scheduler.Tag
}

func (p *executedHooks) TaskExecuted(c *scheduler.Context, t *scheduler.Task, w int, d time.Duration) bool {
	ask := p.AppDriven.TaskExecuted(c, t, w, d)
	p.executed <- t.Tag
	return ask
}

func TestAppDrivenResizesWhenTheTaggedTaskRuns(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, 3)
	a, b := newContexts(t, s, []int{0, 1}, []int{2})
	pol := &executedHooks{AppDriven: hypervisor.NewAppDriven(), executed: make(chan scheduler.Tag, 1024)}
	onResize, resized := resizeEvents()
	hv, err := hypervisor.New(s, hypervisor.WithPolicy(pol), hypervisor.WithGetenv(noEnv), onResize)
	require.NoError(t, err)
	defer hv.Close()
	assert.Equal(t, hypervisor.Trigger(0), hv.Trigger())
	require.NoError(t, hv.Register(a, hypervisor.Limits{}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{}))
	pol.OnTag(42, a, b, 1)
	const before = 50
	submitN(t, s, a, work("before", 100*time.Microsecond, 1), before)
	for range before {
		waitFor(t, pol.executed, 10*time.Second, "the untagged tasks' hooks")
	}
	assert.Empty(t, hv.Resizes(), "nothing before the tagged task")
	gate := make(chan struct{})
	running := make(chan struct{})
	tagged := &scheduler.Codelet{Name: "tagged", CPU: func(*scheduler.Call) error { close(running); <-gate; return nil }}
	require.NoError(t, s.Submit(ctx, tagged, scheduler.InContext(a), scheduler.WithTag(42)))
	waitFor(t, running, 10*time.Second, "the tagged task starts")
	assert.Empty(t, hv.Resizes(), "nothing while it runs")
	assert.Zero(t, pol.Due())
	close(gate)
	r := nextResize(t, resized, 10*time.Second, "one resize after it")
	assert.Equal(t, "a->b", r.From+"->"+r.To)
	assert.Len(t, b.Workers(), 2)
	assert.Equal(t, scheduler.Tag(42), waitFor(t, pol.executed, 10*time.Second, "the tagged task's hook"))
	// Once only: the second task tagged 42 finds no request (its hook
	// asks for no decision), and a decision now has nothing to do.
	require.NoError(t, s.Submit(ctx, clTag(), scheduler.InContext(a), scheduler.WithTag(42)))
	assert.Equal(t, scheduler.Tag(42), waitFor(t, pol.executed, 10*time.Second, "the second tagged task's hook"))
	assert.Empty(t, hv.ResizeNow())
	assert.Len(t, hv.Resizes(), 1)
	assert.Zero(t, pol.Due())
}

// heldAppDriven is app_driven whose first Resize, after taking the due
// requests (none yet), holds the decision lock until release is closed.
type heldAppDriven struct {
	*hypervisor.AppDriven
	entered, release chan struct{}
	once             sync.Once
}

func (p *heldAppDriven) Resize(v *hypervisor.View) []hypervisor.Move {
	moves := p.AppDriven.Resize(v)
	p.once.Do(func() {
		close(p.entered)
		<-p.release
	})
	return moves
}

// oneShot is a custom policy whose hook asks, once, for a decision
// that moves worker 0 to context 1; its first Resize (before the ask)
// holds the decision lock until release is closed. Nothing else ever
// asks for a decision.
type oneShot struct {
	hypervisor.NopHooks
	asked            atomic.Bool
	entered, release chan struct{}
	once             sync.Once
}

func (p *oneShot) Name() string { return "one_shot" }

func (p *oneShot) TaskExecuted(_ *scheduler.Context, t *scheduler.Task, _ int, _ time.Duration) bool {
	if t.Tag == 7 {
		p.asked.Store(true)
		return true
	}
	return false
}

func (p *oneShot) Resize(*hypervisor.View) []hypervisor.Move {
	if p.asked.CompareAndSwap(true, false) {
		return []hypervisor.Move{{Worker: 0, To: 1}}
	}
	p.once.Do(func() {
		close(p.entered)
		<-p.release
	})
	return nil
}

// watchedHypervisor starts pol's hypervisor over contexts "a" (workers
// 0, 1) and "b" (worker 2) of a 3-worker scheduler, both registered,
// with channels of the decisions that found the lock held and of the
// resizes; Close is left to the test's cleanup.
func watchedHypervisor(t *testing.T, pol hypervisor.Policy) (s *scheduler.Scheduler, a, b *scheduler.Context, hv *hypervisor.Hypervisor, busy chan hypervisor.Trigger, resized <-chan hypervisor.Resize) {
	t.Helper()
	s = newSched(t, 3)
	a, b = newContexts(t, s, []int{0, 1}, []int{2})
	busy = make(chan hypervisor.Trigger, 1024)
	onResize, resized := resizeEvents()
	hv, err := hypervisor.New(s, hypervisor.WithPolicy(pol), hypervisor.WithGetenv(noEnv), onResize,
		hypervisor.WithOnBusy(func(tr hypervisor.Trigger) { busy <- tr }))
	require.NoError(t, err)
	t.Cleanup(func() { _ = hv.Close() })
	require.NoError(t, hv.Register(a, hypervisor.Limits{}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{}))
	return s, a, b, hv, busy, resized
}

// TestHookDecisionNotLostWhileAnotherHoldsTheLock: a hook asks for a
// decision while another decision holds the lock. It must run when the
// holder lets go (it used to be dropped: TryLock failed and nothing
// asked again).
func TestHookDecisionNotLostWhileAnotherHoldsTheLock(t *testing.T) {
	ctx := testCtx(t)
	pol := &oneShot{entered: make(chan struct{}), release: make(chan struct{})}
	s, a, _, hv, busy, resized := watchedHypervisor(t, pol)
	held := make(chan []hypervisor.Resize)
	go func() { held <- hv.ResizeNow() }()
	waitFor(t, pol.entered, 10*time.Second, "the first decision holds the lock")
	require.NoError(t, s.Submit(ctx, clTag(), scheduler.InContext(a), scheduler.WithTag(7)))
	assert.Equal(t, hypervisor.TriggerHook, waitFor(t, busy, 10*time.Second, "the hook's decision finds the lock held"))
	close(pol.release)
	r := nextResize(t, resized, 10*time.Second, "the pending decision runs when the holder lets go")
	assert.Equal(t, 0, r.Worker)
	assert.Equal(t, "a->b", r.From+"->"+r.To)
	assert.Empty(t, waitFor(t, held, 10*time.Second, "ResizeNow returns"))
	require.NoError(t, s.WaitAll(ctx))
}

// TestAppDrivenRequestNotLostWhileAnotherHoldsTheLock: the tagged task
// completes while another decision holds the lock; the request is made
// once the holder lets go.
func TestAppDrivenRequestNotLostWhileAnotherHoldsTheLock(t *testing.T) {
	ctx := testCtx(t)
	pol := &heldAppDriven{AppDriven: hypervisor.NewAppDriven(), entered: make(chan struct{}), release: make(chan struct{})}
	s, a, b, hv, busy, resized := watchedHypervisor(t, pol)
	pol.OnTag(42, a, b, 1)

	held := make(chan []hypervisor.Resize)
	go func() { held <- hv.ResizeNow() }()
	waitFor(t, pol.entered, 10*time.Second, "the first decision holds the lock")
	require.NoError(t, s.Submit(ctx, clTag(), scheduler.InContext(a), scheduler.WithTag(42)))
	assert.Equal(t, hypervisor.TriggerHook, waitFor(t, busy, 10*time.Second, "the tag's decision finds the lock held"))
	close(pol.release)
	r := nextResize(t, resized, 10*time.Second, "the pending decision runs when the holder lets go")
	assert.Equal(t, "a->b", r.From+"->"+r.To)
	assert.Equal(t, hypervisor.TriggerHook, r.Trigger)
	assert.Empty(t, waitFor(t, held, 10*time.Second, "ResizeNow returns"), "the held decision itself had nothing to do")
	assert.Len(t, hv.Resizes(), 1)
	require.NoError(t, s.WaitAll(ctx))
}

// decidedAppDriven is app_driven that reports each Resize that proposed
// moves.
type decidedAppDriven struct {
	*hypervisor.AppDriven
	decided chan []hypervisor.Move
}

func (p *decidedAppDriven) Resize(v *hypervisor.View) []hypervisor.Move {
	moves := p.AppDriven.Resize(v)
	if len(moves) > 0 {
		p.decided <- moves
	}
	return moves
}

// TestAppDrivenKeepsARefusedRequestDue: a request whose move the
// source's Limits.Min refuses stays due and is made once the limits
// allow it.
func TestAppDrivenKeepsARefusedRequestDue(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, 3)
	a, b := newContexts(t, s, []int{0, 1}, []int{2})
	pol := &decidedAppDriven{AppDriven: hypervisor.NewAppDriven(), decided: make(chan []hypervisor.Move, 1024)}
	core, logs := observer.New(zap.InfoLevel)
	onResize, resized := resizeEvents()
	hv, err := hypervisor.New(s, hypervisor.WithPolicy(pol), hypervisor.WithGetenv(noEnv), onResize, hypervisor.WithLogger(zap.New(core)))
	require.NoError(t, err)
	defer hv.Close()
	require.NoError(t, hv.Register(a, hypervisor.Limits{Min: 2}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{}))
	pol.OnTag(42, a, b, 1)
	require.NoError(t, s.Submit(ctx, clTag(), scheduler.InContext(a), scheduler.WithTag(42)))
	waitFor(t, pol.decided, 10*time.Second, "the request falls due and its move is proposed")
	require.NoError(t, s.WaitAll(ctx))
	assert.Empty(t, hv.Resizes(), "a is at its min")
	// a's min goes: the next decision makes the move (the hooks' retry or
	// this one).
	require.NoError(t, hv.Register(a, hypervisor.Limits{}))
	hv.ResizeNow()
	r := nextResize(t, resized, 10*time.Second, "the request waited and is made")
	assert.Equal(t, "a->b", r.From+"->"+r.To)
	assert.Len(t, b.Workers(), 2)
	assert.Positive(t, logs.FilterMessageSnippet("the source would go below its minimum").Len(), "the refusal is logged")
	assert.Positive(t, logs.FilterMessageSnippet("request waits").Len(), "the wait is logged")
	assert.Empty(t, hv.ResizeNow(), "done once")
	assert.Zero(t, pol.Due())
}

// TestAppDrivenDropsARequestForAnUnregisteredContext: a request that can
// never be made is dropped, and logged.
func TestAppDrivenDropsARequestForAnUnregisteredContext(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, 3)
	a, b := newContexts(t, s, []int{0, 1}, []int{2})
	pol := hypervisor.NewAppDriven()
	core, logs := observer.New(zap.InfoLevel)
	dropped := make(chan struct{})
	var once sync.Once
	log := zap.New(core, zap.Hooks(func(e zapcore.Entry) error {
		if strings.Contains(e.Message, "request dropped") {
			once.Do(func() { close(dropped) })
		}
		return nil
	}))
	hv, err := hypervisor.New(s, hypervisor.WithPolicy(pol), hypervisor.WithGetenv(noEnv), hypervisor.WithLogger(log))
	require.NoError(t, err)
	defer hv.Close()
	require.NoError(t, hv.Register(a, hypervisor.Limits{}))
	pol.OnTag(42, a, b, 1) // b is not registered
	require.NoError(t, s.Submit(ctx, clTag(), scheduler.InContext(a), scheduler.WithTag(42)))
	waitFor(t, dropped, 10*time.Second, "the request is dropped when it falls due")
	require.NoError(t, s.WaitAll(ctx))
	assert.Equal(t, 1, logs.FilterMessageSnippet("request dropped").Len())
	assert.Empty(t, hv.Resizes())
	assert.Zero(t, pol.Due())
	assert.Empty(t, hv.ResizeNow(), "nothing left to do")
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
	total                                          int64
	allExecuted                                    chan struct{} // closed at total
	idled                                          []chan struct{}
	idledOnce                                      []sync.Once
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

func (p *countingPolicy) IdleCycle(_ *scheduler.Context, w int, _ time.Duration) bool {
	p.idleCycles.Add(1)
	if w < len(p.idled) {
		p.idledOnce[w].Do(func() { close(p.idled[w]) })
	}
	return false
}

func (p *countingPolicy) IdleEnd(*scheduler.Context, int, time.Duration) bool {
	p.idleEnds.Add(1)
	return false
}

func (p *countingPolicy) TaskExecuted(_ *scheduler.Context, t *scheduler.Task, _ int, _ time.Duration) bool {
	if p.executed.Add(1) == p.total {
		close(p.allExecuted)
	}
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
	const n, f = 300, 250.0
	total := int64(2*n + 2)
	pol := &countingPolicy{a: a, b: b, total: total, allExecuted: make(chan struct{}),
		idled: make([]chan struct{}, 3), idledOnce: make([]sync.Once, 3)}
	for i := range pol.idled {
		pol.idled[i] = make(chan struct{})
	}
	onResize, resized := resizeEvents()
	hv, err := hypervisor.New(s, hypervisor.WithPolicy(pol), hypervisor.WithGetenv(noEnv), onResize)
	require.NoError(t, err)
	defer hv.Close()
	require.NoError(t, hv.Register(a, hypervisor.Limits{}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{}))
	// Every worker idles before the work comes: b's only worker, which
	// runs all of b's tasks, ends an idle period.
	for i := range pol.idled {
		waitFor(t, pol.idled[i], 10*time.Second, "an idle cycle of every worker")
	}
	submitN(t, s, a, work("a", 0, f), n)
	submitN(t, s, b, work("b", 0, f), n)
	require.NoError(t, s.Submit(ctx, work("g", 0, f)))
	require.NoError(t, s.Submit(ctx, clTag(), scheduler.InContext(a), scheduler.WithTag(7)))
	require.NoError(t, s.WaitAll(ctx))
	// TaskExecuted runs after the task completes, so WaitAll may return
	// just before the last hook.
	waitFor(t, pol.allExecuted, 10*time.Second, "every task executed is seen")
	r := nextResize(t, resized, 10*time.Second, "the hook's resize")
	assert.Equal(t, "a->b", r.From+"->"+r.To)
	assert.Equal(t, total, pol.pushed.Load())
	assert.Equal(t, total, pol.popped.Load())
	assert.Positive(t, pol.idleCycles.Load())
	assert.Positive(t, pol.idleEnds.Load())
	assert.Equal(t, int64(1), pol.resizes.Load(), "the hook asked for one resize")
	assert.Len(t, b.Workers(), 2)

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

// A context deleted while registered is refused by SetTotalFlops,
// AddTotalFlops and AnnounceTasks (it returned nil), and Register after
// the scheduler's Close is refused with scheduler.ErrClosed (it
// returned nil), as is New.
func TestDeletedContextAndClosedScheduler(t *testing.T) {
	s := newSched(t, 2)
	a, b := newContexts(t, s, []int{0}, []int{1})
	hv, err := hypervisor.New(s, hypervisor.WithGetenv(noEnv))
	require.NoError(t, err)
	defer hv.Close()
	require.NoError(t, hv.Register(a, hypervisor.Limits{TotalFlops: 1}))
	require.NoError(t, hv.SetTotalFlops(a, 2), "registered and live")
	require.NoError(t, a.Delete(nil))
	waitDeleted(t, a)
	err = hv.SetTotalFlops(a, 5)
	assert.ErrorIs(t, err, hypervisor.ErrBadContext)
	assert.ErrorIs(t, err, scheduler.ErrContextDeleted)
	assert.ErrorContains(t, err, `SetTotalFlops(context "a", 5): context "a" was deleted`)
	assert.ErrorContains(t, err, "Unregister it")
	err = hv.AddTotalFlops(a, 1)
	assert.ErrorIs(t, err, scheduler.ErrContextDeleted)
	assert.ErrorContains(t, err, `AddTotalFlops(context "a", 1)`)
	err = hv.AnnounceTasks(a, work("x", 0, 1), 1)
	assert.ErrorIs(t, err, scheduler.ErrContextDeleted)
	assert.ErrorContains(t, err, `AnnounceTasks(context "a", codelet "x", 1)`)
	hv.Unregister(a)
	assert.ErrorContains(t, hv.SetTotalFlops(a, 5), "is not registered; Register it first")

	require.NoError(t, s.Close())
	err = hv.Register(b, hypervisor.Limits{})
	assert.ErrorIs(t, err, scheduler.ErrClosed)
	assert.ErrorContains(t, err, `Register(context "b")`)
	assert.ErrorContains(t, err, "register contexts before closing it")

	// New on the closed scheduler is refused too (it returned a
	// hypervisor that could register nothing).
	hv2, err := hypervisor.New(s, hypervisor.WithGetenv(noEnv))
	assert.Nil(t, hv2)
	assert.ErrorIs(t, err, scheduler.ErrClosed)
	assert.ErrorContains(t, err, "attach the hypervisor before closing it")
}

// TestRegisterOverlappingContexts: registered contexts must not share
// workers: the global context, and a parent with its child (either
// order, at any depth), are refused with both names.
func TestRegisterOverlappingContexts(t *testing.T) {
	s := newSched(t, 4)
	parent, err := s.NewContext("parent", scheduler.ContextWorkers(0, 1, 2))
	require.NoError(t, err)
	child, err := parent.NewContext("child", scheduler.ContextWorkers(1, 2))
	require.NoError(t, err)
	grandchild, err := child.NewContext("grandchild", scheduler.ContextWorkers(2))
	require.NoError(t, err)
	sibling, err := s.NewContext("sibling", scheduler.ContextWorkers(3))
	require.NoError(t, err)
	cases := []struct {
		name      string
		first     *scheduler.Context // registered first (nil: none)
		then      *scheduler.Context
		wantNames []string
	}{
		{"global", nil, s.Global(), []string{`"global"`, "global context"}},
		{"global after a context", sibling, s.Global(), []string{`"global"`}},
		{"child after parent", parent, child, []string{`"child"`, `"parent"`}},
		{"parent after child", child, parent, []string{`"parent"`, `"child"`}},
		{"grandchild after parent", parent, grandchild, []string{`"grandchild"`, `"parent"`}},
		{"parent after grandchild", grandchild, parent, []string{`"parent"`, `"grandchild"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hv, err := hypervisor.New(s, hypervisor.WithGetenv(noEnv))
			require.NoError(t, err)
			defer hv.Close()
			if tc.first != nil {
				require.NoError(t, hv.Register(tc.first, hypervisor.Limits{}))
			}
			err = hv.Register(tc.then, hypervisor.Limits{})
			require.ErrorIs(t, err, hypervisor.ErrBadContext)
			for _, n := range tc.wantNames {
				assert.Contains(t, err.Error(), n)
			}
			if tc.first != nil {
				require.NoError(t, hv.Register(tc.first, hypervisor.Limits{Min: 1}), "registering the same context again updates its limits")
			}
		})
	}
	// Disjoint contexts are fine: siblings, or a child beside its
	// parent's sibling.
	hv, err := hypervisor.New(s, hypervisor.WithGetenv(noEnv))
	require.NoError(t, err)
	defer hv.Close()
	require.NoError(t, hv.Register(child, hypervisor.Limits{}))
	require.NoError(t, hv.Register(sibling, hypervisor.Limits{}))
	hv.Unregister(child)
	require.NoError(t, hv.Register(parent, hypervisor.Limits{}), "after Unregister the parent may come in")
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

// TestLimitsKeepPendingTeams: a context with a pending team of 3 keeps 3
// workers, whatever its Limits.Min says (a resize below a team's size
// would park the team until workers come back).
func TestLimitsKeepPendingTeams(t *testing.T) {
	ctx := context.Background()
	s := newSched(t, 4)
	a, b := newContexts(t, s, []int{0, 1, 2}, []int{3})
	release := make(chan struct{})
	defer close(release)
	// Buffered: the block task may start before the test waits for it
	// (an unbuffered send with a default case was lost then, and the
	// test waited forever).
	started := make(chan struct{}, 1)
	block := &scheduler.Codelet{Name: "block", CPU: func(*scheduler.Call) error {
		select {
		case started <- struct{}{}:
		default:
		}
		<-release
		return nil
	}}
	team := &scheduler.Codelet{Name: "team", Parallel: scheduler.SPMD, CPU: func(*scheduler.Call) error { return nil }}
	require.NoError(t, s.Submit(ctx, block, scheduler.InContext(a)))
	<-started
	require.NoError(t, s.Submit(ctx, team, scheduler.WithTeam(3), scheduler.InContext(a)))
	require.Equal(t, 3, a.MinWorkers())
	hv, err := hypervisor.New(s, hypervisor.WithPolicy(greedyPolicy{}), hypervisor.WithGetenv(noEnv))
	require.NoError(t, err)
	defer hv.Close()
	require.NoError(t, hv.Register(a, hypervisor.Limits{Min: 1}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{}))
	assert.Empty(t, hv.ResizeNow(), "every move would break the team")
	assert.Equal(t, []int{0, 1, 2}, a.Workers())
}

// TestCloseOfAReplacedHypervisorKeepsTheNewOne: New replaces the
// scheduler's monitor; closing the replaced hypervisor must not detach
// the one that replaced it.
func TestCloseOfAReplacedHypervisorKeepsTheNewOne(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, 3)
	a, b := newContexts(t, s, []int{0, 1}, []int{2})
	hv1, err := hypervisor.New(s, hypervisor.WithPolicyName("idle"), hypervisor.WithGetenv(noEnv))
	require.NoError(t, err)
	pol := hypervisor.NewAppDriven()
	onResize, resized := resizeEvents()
	hv2, err := hypervisor.New(s, hypervisor.WithPolicy(pol), hypervisor.WithGetenv(noEnv), onResize)
	require.NoError(t, err)
	defer hv2.Close()
	require.NoError(t, hv2.Register(a, hypervisor.Limits{}))
	require.NoError(t, hv2.Register(b, hypervisor.Limits{}))
	require.NoError(t, hv1.Close())
	pol.OnTag(42, a, b, 1)
	require.NoError(t, s.Submit(ctx, clTag(), scheduler.InContext(a), scheduler.WithTag(42)))
	r := nextResize(t, resized, 10*time.Second, "hv2 resizes after hv1.Close")
	assert.Equal(t, "a->b", r.From+"->"+r.To)
	require.NoError(t, s.WaitAll(ctx))
}

func TestNewNilScheduler(t *testing.T) {
	_, err := hypervisor.New(nil)
	assert.ErrorIs(t, err, hypervisor.ErrBadOption)
}

// TestAppDrivenDueCountsARequestInFlight: between the Resize that
// proposes a request's moves and the Rejected that refuses them, the
// request is still due (the trial read Due() == 0 there).
func TestAppDrivenDueCountsARequestInFlight(t *testing.T) {
	v := lpView(t, hypervisor.TriggerHook, 0, 0)
	a, b := v.Contexts[0].Context, v.Contexts[1].Context
	pol := hypervisor.NewAppDriven()
	pol.OnTag(42, a, b, 1)
	task := scheduler.NewTask(clTag())
	task.Tag = 42
	assert.True(t, pol.TaskExecuted(a, task, 0, 0), "the tagged task asks for a decision")
	assert.Equal(t, 1, pol.Due())
	moves := pol.Resize(v)
	require.Len(t, moves, 1)
	assert.Equal(t, 1, pol.Due(), "proposed, not yet made")
	pol.Rejected(v, moves)
	assert.Equal(t, 1, pol.Due(), "refused: waits")
	moves = pol.Resize(v)
	require.Len(t, moves, 1)
	assert.Equal(t, 1, pol.Due())
	pol.Rejected(v, nil)
	assert.Zero(t, pol.Due(), "made")
}

// TestBadOptionsAndLimitsNamed: invalid options and limits are refused
// with an error that names the option (not an environment variable)
// and the value.
func TestBadOptionsAndLimitsNamed(t *testing.T) {
	s := newSched(t, 4)
	for _, tc := range []struct {
		opt  hypervisor.Option
		want string
	}{
		{hypervisor.WithMinInterval(-time.Millisecond), "WithMinInterval(-1ms)"},
		{hypervisor.WithIdleTick(-time.Millisecond), "WithIdleTick(-1ms)"},
		{hypervisor.WithSpeedGap(-1), "WithSpeedGap(-1)"},
		{hypervisor.WithSpeedGap(math.NaN()), "WithSpeedGap(NaN)"},
		{hypervisor.WithWorkerMaxIdle(99, time.Millisecond), "WithWorkerMaxIdle(99, 1ms)"},
		{hypervisor.WithWindow(-time.Millisecond), "WithWindow(-1ms)"},
		{hypervisor.WithMaxIdle(-time.Millisecond), "WithMaxIdle(-1ms)"},
	} {
		_, err := hypervisor.New(s, tc.opt, hypervisor.WithGetenv(noEnv))
		if assert.ErrorIs(t, err, hypervisor.ErrBadOption, tc.want) {
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "PZ_HYPERVISOR", tc.want)
		}
	}
	_, err := hypervisor.New(s, hypervisor.WithGetenv(func(k string) string {
		return map[string]string{"PZ_HYPERVISOR_SPEED_GAP": "NaN"}[k]
	}))
	assert.ErrorIs(t, err, hypervisor.ErrBadOption, "PZ_HYPERVISOR_SPEED_GAP=NaN")

	a, err := s.NewContext("a", scheduler.ContextWorkers(0, 1))
	require.NoError(t, err)
	hv, err := hypervisor.New(s, hypervisor.WithGetenv(noEnv))
	require.NoError(t, err)
	defer hv.Close()
	for _, lim := range []hypervisor.Limits{{TotalFlops: math.NaN()}, {TotalFlops: math.Inf(1)}, {TotalFlops: -1}, {Min: 10}} {
		err := hv.Register(a, lim)
		if assert.ErrorIs(t, err, hypervisor.ErrBadContext, "%+v", lim) {
			assert.Contains(t, err.Error(), "Limits.", "%+v", lim)
		}
	}
	require.NoError(t, hv.Register(a, hypervisor.Limits{TotalFlops: 1}))
	err = hv.SetTotalFlops(a, -5)
	if assert.ErrorIs(t, err, hypervisor.ErrBadContext) {
		assert.Contains(t, err.Error(), "-5")
	}
	assert.ErrorIs(t, hv.SetTotalFlops(a, math.Inf(1)), hypervisor.ErrBadContext)
	assert.ErrorIs(t, hv.AddTotalFlops(a, math.NaN()), hypervisor.ErrBadContext)
	require.NoError(t, hv.SetTotalFlops(a, 5))
}
