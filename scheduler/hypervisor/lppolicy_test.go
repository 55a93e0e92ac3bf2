package hypervisor_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/hypervisor"
)

// lpView builds a View of two contexts a (workers 0, 1) and b (2, 3) of
// CPU workers running at 1 Gflop/s, with 3e8 flops left in a and 1e8 in
// b: feft's distribution is 3 workers for a, 1 for b, ending in 0.1 s,
// a planned at 3 Gflop/s and b at 1.
func lpView(t *testing.T, why hypervisor.Trigger, speedA, speedB float64) *hypervisor.View {
	t.Helper()
	s := newSched(t, 4)
	a, b := newContexts(t, s, []int{0, 1}, []int{2, 3})
	v := &hypervisor.View{Trigger: why}
	for i, c := range []*scheduler.Context{a, b} {
		v.Contexts = append(v.Contexts, hypervisor.ContextView{
			Context: c, Name: c.Name(), Workers: []int{2 * i, 2*i + 1}, Pending: 10,
			Limits:    hypervisor.Limits{TotalFlops: []float64{4e8, 2e8}[i]},
			FlopsDone: 1e8, Speed: []float64{speedA, speedB}[i], BusySpeed: 1e9, KindSpeed: []float64{1e9},
		})
	}
	for id := range 4 {
		v.Workers = append(v.Workers, hypervisor.WorkerView{ID: id, Context: id / 2, MaxIdle: 2 * time.Millisecond})
	}
	return v
}

func TestFEFTResize(t *testing.T) {
	toA := []hypervisor.Move{{Worker: 3, To: 0}} // b's highest id goes first
	cases := []struct {
		name           string
		why            hypervisor.Trigger
		speedA, speedB float64
		idle           int // worker idle for its max idle (-1: none)
		want           []hypervisor.Move
	}{
		{"a hook moves at once", hypervisor.TriggerHook, 2e9, 2e9, -1, toA},
		{"speeds part from the plan", hypervisor.TriggerSpeed, 2e9, 2e9, -1, toA},
		{"first window: no speed measured yet", hypervisor.TriggerSpeed, 0, 0, -1, toA},
		{"speeds within the gap of the plan", hypervisor.TriggerSpeed, 2.9e9, 1.1e9, -1, nil},
		{"idle trigger, nobody idle", hypervisor.TriggerIdle, 2e9, 2e9, -1, nil},
		{"idle trigger, a donor's worker idle", hypervisor.TriggerIdle, 2e9, 2e9, 2, []hypervisor.Move{{Worker: 2, To: 0}}},
		{"idle trigger, a receiver's worker idle", hypervisor.TriggerIdle, 2e9, 2e9, 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := lpView(t, tc.why, tc.speedA, tc.speedB)
			if tc.idle >= 0 {
				v.Workers[tc.idle].Idle = time.Second
			}
			assert.Equal(t, tc.want, hypervisor.FEFT{Gap: 0.2}.Resize(v))
		})
	}
	t.Run("at the target", func(t *testing.T) {
		v := lpView(t, hypervisor.TriggerHook, 0, 0)
		v.Contexts[0].Workers, v.Contexts[1].Workers = []int{0, 1, 2}, []int{3}
		v.Workers[2].Context = 0
		assert.Empty(t, hypervisor.FEFT{}.Resize(v))
	})
	t.Run("a context done gives its workers but keeps its min", func(t *testing.T) {
		v := lpView(t, hypervisor.TriggerSpeed, 2e9, 0)
		v.Contexts[1].FlopsDone = 2e8
		v.Contexts[1].Pending = 0
		v.Contexts[1].Limits.Min = 1
		assert.Equal(t, toA, hypervisor.FEFT{Gap: 0.2}.Resize(v))
	})
	t.Run("contexts without declared flops keep their workers", func(t *testing.T) {
		v := lpView(t, hypervisor.TriggerHook, 0, 0)
		v.Contexts[1].Limits.TotalFlops = 0
		assert.Empty(t, hypervisor.FEFT{}.Resize(v))
	})
}

func TestTEFTResize(t *testing.T) {
	// a: 30 tasks of 10 ms left; b: 10 tasks of 10 ms and 10 not run yet
	// (same time assumed): 0.3 against 0.2 worker-seconds on 4 workers:
	// 2.4 and 1.6 workers, rounded to 2 and 2 - the current split.
	v := lpView(t, hypervisor.TriggerHook, 0, 0)
	ms := []time.Duration{10 * time.Millisecond}
	v.Types = []hypervisor.TaskTypeView{
		{Context: 0, Name: "x", Remaining: 30, Time: ms, Flops: 1e7},
		{Context: 1, Name: "y", Remaining: 10, Time: ms, Flops: 1e7},
		{Context: 1, Name: "z", Remaining: 10, Time: []time.Duration{0}},
	}
	assert.Empty(t, hypervisor.TEFT{}.Resize(v))
	// 60 tasks left in a: 0.6 against 0.2: 3 and 1.
	v.Types[0].Remaining = 60
	assert.Equal(t, []hypervisor.Move{{Worker: 3, To: 0}}, hypervisor.TEFT{}.Resize(v))
	// Under the speed trigger, planned speeds are the flops left over the
	// predicted end (0.2 s): a 3 Gflop/s, b 0.5 Gflop/s (z's flops are
	// unknown); measured ones close to them move nothing.
	v.Trigger = hypervisor.TriggerSpeed
	v.Contexts[0].Speed, v.Contexts[1].Speed = 3e9, 0.5e9
	assert.Empty(t, hypervisor.TEFT{Gap: 0.2}.Resize(v))
	v.Contexts[0].Speed = 2e9
	assert.Equal(t, []hypervisor.Move{{Worker: 3, To: 0}}, hypervisor.TEFT{Gap: 0.2}.Resize(v))
	// One context's types only: nothing to share.
	v.Types = v.Types[:1]
	assert.Empty(t, hypervisor.TEFT{}.Resize(v))
}

// TestFEFTAndTEFTMoveWorkersInARun: the policies in a live run, driven
// by their default triggers: a has ten times b's work, so b's second
// worker goes to a.
func TestFEFTAndTEFTMoveWorkersInARun(t *testing.T) {
	for _, name := range []string{"feft", "teft"} {
		t.Run(name, func(t *testing.T) {
			s := newSched(t, 4)
			a, b := newContexts(t, s, []int{0, 1}, []int{2, 3})
			onResize, resized := resizeEvents()
			hv, err := hypervisor.New(s, hypervisor.WithPolicyName(name), hypervisor.WithWindow(10*time.Millisecond),
				hypervisor.WithGetenv(noEnv), onResize)
			require.NoError(t, err)
			defer hv.Close()
			assert.Equal(t, hypervisor.TriggerIdle|hypervisor.TriggerSpeed, hv.Trigger())
			const f = 1e6
			const na, nb = 600, 60
			cla, clb := work("a", time.Millisecond, f), work("b", time.Millisecond, f)
			require.NoError(t, hv.Register(a, hypervisor.Limits{TotalFlops: na * f}))
			require.NoError(t, hv.Register(b, hypervisor.Limits{TotalFlops: nb * f}))
			require.NoError(t, hv.AnnounceTasks(a, cla, na))
			require.NoError(t, hv.AnnounceTasks(b, clb, nb))
			submitN(t, s, a, cla, na)
			submitN(t, s, b, clb, nb)
			r := nextResize(t, resized, 30*time.Second, "b gives a a worker")
			assert.Equal(t, "b->a", r.From+"->"+r.To)
			assert.Equal(t, name, r.Policy)
			require.NoError(t, s.WaitAll(testCtx(t)))
			d := directions(hv.Resizes())
			assert.Zero(t, d["a->b"], "%v", d)
		})
	}
}

func TestAnnounceTasksBadInput(t *testing.T) {
	s := newSched(t, 2)
	a, _ := newContexts(t, s, []int{0}, []int{1})
	hv, err := hypervisor.New(s, hypervisor.WithPolicyName("teft"), hypervisor.WithGetenv(noEnv))
	require.NoError(t, err)
	defer hv.Close()
	cl := work("x", 0, 1)
	assert.ErrorIs(t, hv.AnnounceTasks(a, cl, 1), hypervisor.ErrBadContext, "not registered")
	require.NoError(t, hv.Register(a, hypervisor.Limits{}))
	err = hv.AnnounceTasks(a, nil, 1)
	assert.ErrorIs(t, err, hypervisor.ErrBadOption)
	assert.ErrorContains(t, err, `AnnounceTasks(context "a", nil codelet, 1): give the codelet`)
	err = hv.AnnounceTasks(a, cl, -3)
	assert.ErrorIs(t, err, hypervisor.ErrBadOption)
	// The codelet is named, not printed as a struct.
	assert.ErrorContains(t, err, `AnnounceTasks(context "a", codelet "x", -3): the number of tasks announced must be at least 0`)
	assert.NotContains(t, err.Error(), "&{")
	require.NoError(t, hv.AnnounceTasks(a, cl, 3))
	require.NoError(t, hv.AddTotalFlops(a, 5))
	require.NoError(t, hv.AddTotalFlops(a, -10))
	assert.Empty(t, hv.ResizeNow(), "one context: nothing to share")
}

// TestTEFTSpeedTriggerWithoutFlops: with codelets that declare no Flops,
// teft plans and measures speeds in tasks per second, so the speed
// trigger still moves workers.
func TestTEFTSpeedTriggerWithoutFlops(t *testing.T) {
	// a: 60 tasks of 10 ms left, b: 20: 0.6 against 0.2 worker-seconds on
	// 4 workers: 3 and 1, ending in 0.2 s; a planned at 300 tasks/s, b at
	// 100.
	v := lpView(t, hypervisor.TriggerSpeed, 0, 0)
	ms := []time.Duration{10 * time.Millisecond}
	v.Types = []hypervisor.TaskTypeView{
		{Context: 0, Name: "x", Remaining: 60, Time: ms},
		{Context: 1, Name: "y", Remaining: 20, Time: ms},
	}
	v.Contexts[0].TaskSpeed, v.Contexts[1].TaskSpeed = 300, 100
	assert.Empty(t, hypervisor.TEFT{Gap: 0.2}.Resize(v), "on plan")
	v.Contexts[0].TaskSpeed = 200
	assert.Equal(t, []hypervisor.Move{{Worker: 3, To: 0}}, hypervisor.TEFT{Gap: 0.2}.Resize(v), "a off its plan")
}

// TestTEFTMovesWithoutFlopsInARun: the trial's run - S with 100 tasks,
// L with 1000, announced, codelets without Flops, 2+2 workers - moves a
// worker to L on the speed trigger before S is done.
func TestTEFTMovesWithoutFlopsInARun(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, 4)
	small, large := newContexts(t, s, []int{0, 1}, []int{2, 3})
	// The small context's pending tasks at each resize.
	pending := make(chan int64, 1024)
	resized := make(chan hypervisor.Resize, 1024)
	onResize := hypervisor.WithOnResize(func(r hypervisor.Resize) { pending <- small.Pending(); resized <- r })
	hv, err := hypervisor.New(s, hypervisor.WithPolicyName("teft"), hypervisor.WithTrigger(hypervisor.TriggerSpeed),
		hypervisor.WithGetenv(noEnv), onResize)
	require.NoError(t, err)
	defer hv.Close()
	require.NoError(t, hv.Register(small, hypervisor.Limits{}))
	require.NoError(t, hv.Register(large, hypervisor.Limits{}))
	cs, cl := work("s", time.Millisecond, 0), work("l", time.Millisecond, 0)
	cs.Flops, cl.Flops = nil, nil
	require.NoError(t, hv.AnnounceTasks(small, cs, 100))
	require.NoError(t, hv.AnnounceTasks(large, cl, 1000))
	submitN(t, s, small, cs, 100)
	submitN(t, s, large, cl, 1000)
	r := nextResize(t, resized, 30*time.Second, "teft moves on the speed trigger")
	assert.Equal(t, hypervisor.TriggerSpeed, r.Trigger)
	assert.Equal(t, "a->b", r.From+"->"+r.To)
	assert.Positive(t, <-pending, "the move came while the small context still had work")
	require.NoError(t, s.WaitAll(ctx))
}

// typesSpy wraps TEFT and keeps the task types of the last View it saw.
type typesSpy struct {
	hypervisor.TEFT
	types chan []hypervisor.TaskTypeView
}

func (p *typesSpy) Resize(v *hypervisor.View) []hypervisor.Move {
	p.types <- v.Types
	return nil
}

// TestAnnouncedFewerThanSubmitted: a type announced with fewer tasks
// than were submitted counts the submitted ones not completed as left
// (teft planned for the announced count alone, so a context that
// submitted more than it announced looked done and lost its workers).
func TestAnnouncedFewerThanSubmitted(t *testing.T) {
	s := newSched(t, 2)
	a, b := newContexts(t, s, []int{0}, []int{1})
	spy := &typesSpy{types: make(chan []hypervisor.TaskTypeView, 1)}
	hv, err := hypervisor.New(s, hypervisor.WithPolicy(spy), hypervisor.WithTrigger(0), hypervisor.WithGetenv(noEnv))
	require.NoError(t, err)
	defer hv.Close()
	require.NoError(t, hv.Register(a, hypervisor.Limits{}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{}))
	gate, started := make(chan struct{}), make(chan struct{}, 3)
	cl := &scheduler.Codelet{Name: "x", CPU: func(*scheduler.Call) error { started <- struct{}{}; <-gate; return nil }}
	require.NoError(t, hv.AnnounceTasks(a, cl, 1))
	submitN(t, s, a, cl, 3)
	<-started // the first of the three runs, the others wait: all pushed
	hv.ResizeNow()
	types := <-spy.types
	close(gate)
	require.NoError(t, a.WaitAll(testCtx(t)))
	require.Len(t, types, 1)
	assert.Equal(t, "x", types[0].Name)
	assert.EqualValues(t, 3, types[0].Remaining, "3 submitted, 1 announced, none completed")
}

// Close warns about each type of task announced of which fewer were
// submitted: teft held workers for work that never came. A type
// submitted as announced gets no warning.
func TestCloseWarnsAnnouncedNeverSubmitted(t *testing.T) {
	s := newSched(t, 2)
	a, b := newContexts(t, s, []int{0}, []int{1})
	spy := &typesSpy{types: make(chan []hypervisor.TaskTypeView, 1)}
	core, logs := observer.New(zap.WarnLevel)
	hv, err := hypervisor.New(s, hypervisor.WithPolicy(spy), hypervisor.WithTrigger(0), hypervisor.WithGetenv(noEnv), hypervisor.WithLogger(zap.New(core)))
	require.NoError(t, err)
	require.NoError(t, hv.Register(a, hypervisor.Limits{}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{}))
	short := &scheduler.Codelet{Name: "short", CPU: func(*scheduler.Call) error { return nil }}
	exact := &scheduler.Codelet{Name: "exact", CPU: func(*scheduler.Call) error { return nil }}
	require.NoError(t, hv.AnnounceTasks(a, short, 5))
	require.NoError(t, hv.AnnounceTasks(b, exact, 2))
	submitN(t, s, a, short, 2)
	submitN(t, s, b, exact, 2)
	require.NoError(t, s.WaitAll(testCtx(t)))
	require.NoError(t, hv.Close())
	warns := logs.FilterMessageSnippet("never submitted").All()
	require.Len(t, warns, 1, "%v", logs.All())
	f := warns[0].ContextMap()
	assert.Equal(t, a.Name(), f["context"])
	assert.Equal(t, "short", f["codelet"])
	assert.EqualValues(t, 5, f["announced"])
	assert.EqualValues(t, 2, f["submitted"])
}
