package hypervisor_test

import (
	"math"
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

// countersReader is a policy that reads the hypervisor's counters in
// Resize, as a custom policy that explains its decisions would.
type countersReader struct {
	hv   **hypervisor.Hypervisor
	move hypervisor.Move
	read chan hypervisor.ContextCounters
}

func (countersReader) Name() string { return "counters_reader" }

func (p countersReader) Resize(v *hypervisor.View) []hypervisor.Move {
	p.read <- (*p.hv).Counters(v.Contexts[0].Context)
	return []hypervisor.Move{p.move}
}

// Trial finding: WithOnResize's function that read the counters of the
// contexts moved (Counters, Worker) hung the worker deciding, and with
// it every later call of Counters, Close and the scheduler's Close: both
// took the decision lock that the deciding goroutine holds. The same
// held for a policy's Resize. They read the speeds without that lock now.
func TestCountersFromOnResizeAndResize(t *testing.T) {
	s := newSched(t, 2)
	a, b := newContexts(t, s, []int{0}, []int{1})
	var hv *hypervisor.Hypervisor
	type seen struct {
		ctr hypervisor.ContextCounters
		wc  hypervisor.WorkerCounters
		rs  []hypervisor.Resize
	}
	onResize := make(chan seen, 1)
	pol := countersReader{hv: &hv, move: hypervisor.Move{Worker: 0, To: 1}, read: make(chan hypervisor.ContextCounters, 1)}
	hv, err := hypervisor.New(s, hypervisor.WithPolicy(pol), hypervisor.WithGetenv(noEnv),
		hypervisor.WithOnResize(func(r hypervisor.Resize) {
			onResize <- seen{hv.Counters(a), hv.Worker(r.Worker), hv.Resizes()}
		}))
	require.NoError(t, err)
	defer hv.Close()
	require.NoError(t, hv.Register(a, hypervisor.Limits{}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{}))
	submitN(t, s, a, work("w", 0, 2), 3)
	require.NoError(t, a.WaitAll(testCtx(t)))

	done := make(chan []hypervisor.Resize, 1)
	go func() { done <- hv.ResizeNow() }()
	var got seen
	select {
	case got = <-onResize:
	case <-time.After(30 * time.Second): // a failure guard: a hang is the bug
		t.Fatal("WithOnResize's function did not return: Counters or Worker waits for the decision lock")
	}
	var rs []hypervisor.Resize
	select {
	case rs = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("ResizeNow did not return")
	}
	require.Len(t, rs, 1)
	assert.Equal(t, int64(3), (<-pol.read).Done, "Counters in Resize")
	assert.Equal(t, int64(3), got.ctr.Done, "Counters in WithOnResize")
	assert.Equal(t, 6.0, got.ctr.Flops)
	assert.Equal(t, int64(3), got.wc.Done, "Worker in WithOnResize")
	assert.Len(t, got.rs, 1, "Resizes in WithOnResize")
	assert.Equal(t, int64(3), hv.Counters(a).Done)
}

// Trial finding: New took WithTrigger(TriggerHook) and WithTrigger of
// bits that are no trigger for "none" without a word, and PolicyByName
// took the gaps that WithSpeedGap refuses (negative, NaN).
func TestNonsenseTriggerAndGapRefused(t *testing.T) {
	s := newSched(t, 2)
	for _, tc := range []struct {
		trig hypervisor.Trigger
		want string
	}{
		{hypervisor.TriggerHook, "TriggerHook is not configured"},
		{hypervisor.TriggerIdle | hypervisor.TriggerHook, "WithTrigger(5)"},
		{hypervisor.Trigger(64), "bits 0x40 are no trigger"},
	} {
		_, err := hypervisor.New(s, hypervisor.WithTrigger(tc.trig), hypervisor.WithGetenv(noEnv))
		if assert.ErrorIs(t, err, hypervisor.ErrBadOption, tc.want) {
			assert.Contains(t, err.Error(), tc.want)
		}
	}
	for _, trig := range []hypervisor.Trigger{0, hypervisor.TriggerIdle, hypervisor.TriggerSpeed, hypervisor.TriggerIdle | hypervisor.TriggerSpeed} {
		hv, err := hypervisor.New(s, hypervisor.WithTrigger(trig), hypervisor.WithGetenv(noEnv))
		if assert.NoError(t, err, trig) {
			assert.Equal(t, trig, hv.Trigger())
			require.NoError(t, hv.Close())
		}
	}
	for _, gap := range []float64{-3, math.NaN()} {
		_, err := hypervisor.PolicyByName("ispeed", gap)
		if assert.ErrorIs(t, err, hypervisor.ErrBadOption, gap) {
			assert.Contains(t, err.Error(), "speed gap", gap)
		}
	}
	p, err := hypervisor.PolicyByName("ispeed", 0)
	require.NoError(t, err)
	assert.Equal(t, "ispeed", p.Name())
}

// Trial finding: Register's refusal of Limits{Min: 2, Max: 1} said
// "limits min 2, max 1", not what is wrong with them.
func TestRegisterLimitsSayWhatIsWrong(t *testing.T) {
	s := newSched(t, 3)
	a, _ := newContexts(t, s, []int{0}, []int{1})
	hv, err := hypervisor.New(s, hypervisor.WithGetenv(noEnv))
	require.NoError(t, err)
	defer hv.Close()
	for _, tc := range []struct {
		lim  hypervisor.Limits
		want string
	}{
		{hypervisor.Limits{Min: 2, Max: 1}, "Limits.Min 2 is above Limits.Max 1"},
		{hypervisor.Limits{Min: -1}, "Limits.Min -1 is negative"},
		{hypervisor.Limits{Max: -1}, "Limits.Max -1 is negative"},
	} {
		err := hv.Register(a, tc.lim)
		if assert.ErrorIs(t, err, hypervisor.ErrBadContext, tc.want) {
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), `context "a"`)
		}
	}
	require.NoError(t, hv.Register(a, hypervisor.Limits{Min: 1, Max: 1}))
}

// Trial finding: OnTag returned nothing, so a request that can never be
// made - tag 0, which no task carries; no worker to move; a nil
// context; the same context twice; a context of another scheduler -
// was taken and, at best, dropped with a log line when its task
// completed (never, for tag 0).
func TestOnTagRefusesRequestsThatCannotBeMade(t *testing.T) {
	s := newSched(t, 2)
	a, b := newContexts(t, s, []int{0}, []int{1})
	other, err := newSched(t, 1).NewContext("other", scheduler.ContextWorkers(0))
	require.NoError(t, err)
	pol := hypervisor.NewAppDriven()
	for _, tc := range []struct {
		tag      scheduler.Tag
		from, to *scheduler.Context
		n        int
		is       error
		want     string
	}{
		{0, a, b, 1, hypervisor.ErrBadOption, "tag 0 means no tag"},
		{1, a, b, 0, hypervisor.ErrBadOption, "at least 1"},
		{1, a, b, -2, hypervisor.ErrBadOption, "at least 1"},
		{1, nil, b, 1, hypervisor.ErrBadContext, "give both contexts"},
		{1, a, nil, 1, hypervisor.ErrBadContext, "give both contexts"},
		{1, a, a, 1, hypervisor.ErrBadContext, "the context they are in"},
		{1, a, other, 1, hypervisor.ErrBadContext, "two schedulers"},
	} {
		err := pol.OnTag(tc.tag, tc.from, tc.to, tc.n)
		if assert.ErrorIs(t, err, tc.is, tc.want) {
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "OnTag(")
		}
	}

	// Nothing was recorded: the tagged task moves nobody, while the
	// valid request made afterwards moves a worker.
	onResize, resized := resizeEvents()
	hv, err := hypervisor.New(s, hypervisor.WithPolicy(pol), onResize, hypervisor.WithGetenv(noEnv))
	require.NoError(t, err)
	defer hv.Close()
	require.NoError(t, hv.Register(a, hypervisor.Limits{}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{}))
	submitN(t, s, a, work("tagged", 0, 0), 1, scheduler.WithTag(1))
	require.NoError(t, s.WaitAll(testCtx(t)))
	assert.Zero(t, pol.Due(), "a refused request fell due")
	require.NoError(t, pol.OnTag(2, a, b, 1))
	submitN(t, s, a, work("tagged", 0, 0), 1, scheduler.WithTag(2))
	r := nextResize(t, resized, 30*time.Second, "the valid request")
	assert.Equal(t, "a", r.From)
	assert.Equal(t, "b", r.To)
	assert.Empty(t, hv.Resizes()[1:], "only the valid request moved a worker")
}

// moveFirst is a policy that always moves worker 0 to the second
// registered context.
type moveFirst struct{}

func (moveFirst) Name() string { return "move_first" }
func (moveFirst) Resize(*hypervisor.View) []hypervisor.Move {
	return []hypervisor.Move{{Worker: 0, To: 1}}
}

// Trial finding: after Close, Register returned nil, so the program
// believed the context would be resized, and ResizeNow still ran the
// policy and moved workers; Counters(nil) panicked.
func TestClosedHypervisorResizesNothing(t *testing.T) {
	s := newSched(t, 3)
	a, b := newContexts(t, s, []int{0}, []int{1})
	hv, err := hypervisor.New(s, hypervisor.WithPolicy(moveFirst{}), hypervisor.WithGetenv(noEnv))
	require.NoError(t, err)
	require.NoError(t, hv.Register(a, hypervisor.Limits{}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{}))
	require.NoError(t, hv.Close())
	assert.Nil(t, hv.ResizeNow(), "a closed hypervisor moved a worker")
	assert.Empty(t, hv.Resizes())
	assert.Equal(t, []int{0}, a.Workers())
	c, err := s.NewContext("c", scheduler.ContextWorkers(2))
	require.NoError(t, err)
	err = hv.Register(c, hypervisor.Limits{})
	if assert.ErrorIs(t, err, hypervisor.ErrClosed) {
		assert.Contains(t, err.Error(), `Register(context "c")`)
	}
	assert.Equal(t, hypervisor.ContextCounters{}, hv.Counters(nil))
}

// panicky is a custom policy whose hook or Resize panics, as a policy
// with a bug would.
type panicky struct {
	hypervisor.NopHooks
	in    string // "TaskExecuted", "TaskPushed", "Resize" or "OnResize"
	calls atomic.Int64
}

func (*panicky) Name() string { return "panicky" }

func (p *panicky) Resize(v *hypervisor.View) []hypervisor.Move {
	if p.in == "Resize" {
		panic("bug in Resize")
	}
	if p.in == "OnResize" && len(v.Contexts) == 2 && len(v.Contexts[0].Workers) > 1 {
		return []hypervisor.Move{{Worker: v.Contexts[0].Workers[0], To: 1}}
	}
	return nil
}

func (p *panicky) TaskPushed(*scheduler.Context, *scheduler.Task) bool {
	p.calls.Add(1)
	if p.in == "TaskPushed" {
		panic("bug in TaskPushed")
	}
	return false
}

func (p *panicky) TaskExecuted(*scheduler.Context, *scheduler.Task, int, time.Duration) bool {
	if p.in == "TaskExecuted" {
		panic("bug in TaskExecuted")
	}
	return p.in == "Resize" || p.in == "OnResize"
}

// Trial finding: a custom policy whose hook or Resize panicked (or a
// WithOnResize function that did) crashed the whole program from a
// worker goroutine - or from Submit, for TaskPushed - losing every task
// submitted, where a panicking codelet or callback fails its task
// only. The hypervisor recovers the panic, logs it, stops calling the
// policy (it resizes nothing more) and reports it from Err and Close;
// the tasks all run.
func TestPolicyPanicStopsThePolicyNotTheProgram(t *testing.T) {
	for _, in := range []string{"TaskExecuted", "TaskPushed", "Resize", "OnResize"} {
		t.Run(in, func(t *testing.T) {
			s := newSched(t, 3)
			a, b := newContexts(t, s, []int{0, 1}, []int{2})
			pol := &panicky{in: in}
			opts := []hypervisor.Option{hypervisor.WithPolicy(pol), hypervisor.WithGetenv(noEnv)}
			if in == "OnResize" {
				opts = append(opts, hypervisor.WithOnResize(func(hypervisor.Resize) { panic("bug in OnResize") }))
			}
			hv, err := hypervisor.New(s, opts...)
			require.NoError(t, err)
			require.NoError(t, hv.Register(a, hypervisor.Limits{}))
			require.NoError(t, hv.Register(b, hypervisor.Limits{}))
			var ran atomic.Int64
			cl := &scheduler.Codelet{Name: "t", CPU: func(*scheduler.Call) error { ran.Add(1); return nil }}
			const n = 20
			submitN(t, s, a, cl, n)
			require.NoError(t, s.WaitAll(testCtx(t)))
			assert.Equal(t, int64(n), ran.Load(), "every task submitted ran")

			herr := hv.Err()
			require.ErrorIs(t, herr, hypervisor.ErrPolicyPanic)
			assert.Contains(t, herr.Error(), `policy "panicky"`)
			want := map[string]string{"TaskExecuted": "TaskExecuted", "TaskPushed": "TaskPushed", "Resize": "Resize", "OnResize": "WithOnResize"}[in]
			assert.Contains(t, herr.Error(), want, "names where it panicked")
			assert.Contains(t, herr.Error(), "bug in", "gives the panic's value")
			assert.Contains(t, herr.Error(), "trial_test.go", "gives the panic's site")

			// The policy is not called again.
			pushed := pol.calls.Load()
			submitN(t, s, a, cl, n)
			require.NoError(t, s.WaitAll(testCtx(t)))
			assert.Equal(t, pushed, pol.calls.Load(), "a hook was called after the panic")
			assert.Nil(t, hv.ResizeNow())
			assert.ErrorIs(t, hv.Close(), hypervisor.ErrPolicyPanic, "Close reports the panic")
		})
	}
}

// Trial finding: Register took minimums that add up to more workers
// than the scheduler has (three contexts with Limits.Min 1, 3 and 3 on
// 6 workers) without a word; feft then logged "no distribution of the
// workers fits" at every decision, and no policy could honour them.
// Register refuses the context whose minimum makes the sum too large,
// naming the others.
func TestRegisterRefusesMinimumsAboveTheWorkers(t *testing.T) {
	s := newSched(t, 3)
	a, b := newContexts(t, s, []int{0, 1}, []int{2})
	hv, err := hypervisor.New(s, hypervisor.WithPolicyName("feft"), hypervisor.WithGetenv(noEnv))
	require.NoError(t, err)
	defer hv.Close()
	require.NoError(t, hv.Register(a, hypervisor.Limits{Min: 2}))
	err = hv.Register(b, hypervisor.Limits{Min: 2})
	require.ErrorIs(t, err, hypervisor.ErrBadContext)
	assert.Contains(t, err.Error(), `context "b": Limits.Min 2`)
	assert.Contains(t, err.Error(), `context "a" 2`, "names the other minimums")
	assert.Contains(t, err.Error(), "add up to 4")
	assert.Contains(t, err.Error(), "3 workers")
	require.NoError(t, hv.Register(b, hypervisor.Limits{Min: 1}))
	require.NoError(t, hv.Register(a, hypervisor.Limits{Min: 2}), "registering again with the same limits")
	require.ErrorIs(t, hv.Register(a, hypervisor.Limits{Min: 3}), hypervisor.ErrBadContext)
	hv.Unregister(b)
	require.NoError(t, hv.Register(a, hypervisor.Limits{Min: 3}), "b's minimum no longer counts")
}

// Trial finding: a context registered with Limits.TotalFlops whose
// codelets declare no Flops never saw its remaining work go down: under
// feft or gflops_rate it kept a worker after its last task, idle, while
// the other context had work, and nothing said why. The hypervisor
// warns once per context.
func TestTotalFlopsWithoutFlopsWarns(t *testing.T) {
	s := newSched(t, 2)
	a, b := newContexts(t, s, []int{0}, []int{1})
	core, logs := observer.New(zapcore.WarnLevel)
	hv, err := hypervisor.New(s, hypervisor.WithPolicyName("feft"), hypervisor.WithGetenv(noEnv),
		hypervisor.WithTrigger(0), hypervisor.WithLogger(zap.New(core)))
	require.NoError(t, err)
	defer hv.Close()
	require.NoError(t, hv.Register(a, hypervisor.Limits{TotalFlops: 1e6}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{TotalFlops: 1e6}))
	submitN(t, s, a, &scheduler.Codelet{Name: "noflops", CPU: func(*scheduler.Call) error { return nil }}, 3)
	submitN(t, s, b, work("w", 0, 1e3), 3)
	require.NoError(t, s.WaitAll(testCtx(t)))
	hv.ResizeNow()
	hv.ResizeNow()
	warned := logs.FilterMessageSnippet("did no flops").All()
	require.Len(t, warned, 1, "one warning, for a alone")
	assert.Equal(t, "a", warned[0].ContextMap()["context"])
	assert.Contains(t, warned[0].Message, "Codelet.Flops")
}

// closeHeld is a custom policy whose hook asks for a decision when a
// task tagged 7 or 8 completes; its first Resize holds the decision
// until release is closed, then moves worker 0 to the second context.
// It counts its Resize calls.
type closeHeld struct {
	hypervisor.NopHooks
	entered, release chan struct{}
	calls            atomic.Int64
}

func (*closeHeld) Name() string { return "close_held" }

func (p *closeHeld) TaskExecuted(_ *scheduler.Context, t *scheduler.Task, _ int, _ time.Duration) bool {
	return t.Tag == 7 || t.Tag == 8
}

func (p *closeHeld) Resize(*hypervisor.View) []hypervisor.Move {
	if p.calls.Add(1) == 1 {
		close(p.entered)
		<-p.release
		return []hypervisor.Move{{Worker: 0, To: 1}}
	}
	return nil
}

// TestCloseWaitsForTheDecisionInFlight: Close called while a decision
// runs on a worker's goroutine used to return at once, and the decision
// then moved a worker (and a decision left pending meanwhile ran the
// policy again) after Close had returned. Close now waits for it, runs
// the decision left pending before Close was called (issue 9: pending
// decisions are never dropped) before it returns, and no decision
// starts after Close.
func TestCloseWaitsForTheDecisionInFlight(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, 3)
	a, b := newContexts(t, s, []int{0, 1}, []int{2})
	pol := &closeHeld{entered: make(chan struct{}), release: make(chan struct{})}
	busy := make(chan hypervisor.Trigger, 1024)
	closeWaits := make(chan struct{})
	onResize, resized := resizeEvents()
	hv, err := hypervisor.New(s, hypervisor.WithPolicy(pol), hypervisor.WithGetenv(noEnv), onResize,
		hypervisor.WithOnBusy(func(tr hypervisor.Trigger) { busy <- tr }),
		hypervisor.WithOnCloseWait(func() { close(closeWaits) }))
	require.NoError(t, err)
	require.NoError(t, hv.Register(a, hypervisor.Limits{}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{}))

	// The decision runs on the goroutine of the worker that ran task 7.
	require.NoError(t, s.Submit(ctx, clTag(), scheduler.InContext(a), scheduler.WithTag(7)))
	waitFor(t, pol.entered, 10*time.Second, "the hook's decision is under way")
	// Another decision asked for meanwhile is left pending.
	require.NoError(t, s.Submit(ctx, clTag(), scheduler.InContext(b), scheduler.WithTag(8)))
	assert.Equal(t, hypervisor.TriggerHook, waitFor(t, busy, 10*time.Second, "the second decision is left pending"))

	closeDone := make(chan struct{})
	var closeErr error
	go func() { closeErr = hv.Close(); close(closeDone) }()
	select {
	case <-closeDone:
		t.Error("Close returned while a decision was under way")
	case <-closeWaits:
	case <-time.After(10 * time.Second):
		t.Fatal("Close neither returned nor waited for the decision")
	}
	close(pol.release)
	waitFor(t, closeDone, 10*time.Second, "Close returns once the decision ends")
	require.NoError(t, closeErr)

	// Everything the decision did, it did before Close returned.
	select {
	case r := <-resized:
		assert.Equal(t, "a->b", r.From+"->"+r.To)
	default:
		t.Error("the decision under way at Close moved its worker after Close returned")
	}
	assert.Len(t, hv.Resizes(), 1)
	assert.Equal(t, int64(2), pol.calls.Load(), "the decision pending at Close runs once, before Close returns")

	// Nothing decides after Close: neither hooks nor ResizeNow.
	require.NoError(t, s.Submit(ctx, clTag(), scheduler.InContext(b), scheduler.WithTag(8)))
	require.NoError(t, s.WaitAll(ctx))
	assert.Nil(t, hv.ResizeNow())
	assert.Equal(t, int64(2), pol.calls.Load(), "a decision ran after Close")
	assert.Len(t, hv.Resizes(), 1)
	select {
	case r := <-resized:
		t.Errorf("moved after Close: %+v", r)
	default:
	}
}
