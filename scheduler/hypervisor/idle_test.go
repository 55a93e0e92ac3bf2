package hypervisor_test

import (
	"slices"
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

// countedPolicy wraps a built-in policy: it counts the decisions
// (Resize calls), and worker 0's idle cycles once armed, closing
// cycled when they reach want.
type countedPolicy struct {
	hypervisor.Policy
	hypervisor.NopHooks
	decisions atomic.Int64
	armed     atomic.Bool
	cycles    atomic.Int64
	want      int64
	cycled    chan struct{}
	// hold makes the next Resize report on entered and wait for
	// release.
	hold             atomic.Bool
	entered, release chan struct{}
}

func (p *countedPolicy) Resize(v *hypervisor.View) []hypervisor.Move {
	p.decisions.Add(1)
	if p.hold.CompareAndSwap(true, false) {
		p.entered <- struct{}{}
		<-p.release
	}
	return p.Policy.Resize(v)
}

func (p *countedPolicy) IdleCycle(_ *scheduler.Context, w int, _ time.Duration) bool {
	if w == 0 && p.armed.Load() && p.cycles.Add(1) == p.want {
		close(p.cycled)
	}
	return false
}

// typedCountedPolicy forwards teft's TaskTyped.
type typedCountedPolicy struct{ *countedPolicy }

func (typedCountedPolicy) WantsTaskTypes() {}

// Trial finding: with an idle trigger, an idle hypervisor ran its
// policy every idle tick (about 1 ms), so a finished program whose
// contexts had not done their TotalFlops paid 27-78 ms of CPU a second
// for decisions that moved nothing. While decisions move nothing and
// nothing happens, they now back off (doubling up to MaxQuiet); an
// event ends the backoff. The test counts the decisions made during
// 300 idle cycles of a worker: one per cycle before (about 300), a
// handful after (the doublings, then one per MaxQuiet of the time the
// cycles took).
func TestIdleDecisionsBackOff(t *testing.T) {
	for _, name := range []string{"idle", "gflops_rate", "ispeed", "throughput", "feft", "teft"} {
		t.Run(name, func(t *testing.T) {
			inner, err := hypervisor.PolicyByName(name, 0.2)
			require.NoError(t, err)
			cp := &countedPolicy{Policy: inner, want: 300, cycled: make(chan struct{}),
				entered: make(chan struct{}), release: make(chan struct{})}
			var pol hypervisor.Policy = cp
			if _, ok := inner.(hypervisor.TaskTyped); ok {
				pol = typedCountedPolicy{cp}
			}
			s := newSched(t, 2)
			a, b := newContexts(t, s, []int{0}, []int{1})
			hv, err := hypervisor.New(s, hypervisor.WithPolicy(pol), hypervisor.WithGetenv(noEnv),
				hypervisor.WithTrigger(hypervisor.DefaultTrigger(inner)))
			require.NoError(t, err)
			defer hv.Close()
			for _, c := range []*scheduler.Context{a, b} {
				// Declared work never all done: the contexts stay active.
				require.NoError(t, hv.Register(c, hypervisor.Limits{Min: 1, TotalFlops: 1e12}))
			}
			cl := work("w", 100*time.Microsecond, 1e6)
			submitN(t, s, a, cl, 10)
			submitN(t, s, b, cl, 10)
			require.NoError(t, s.WaitAll(testCtx(t)))

			start, before := time.Now(), cp.decisions.Load()
			cp.armed.Store(true)
			waitFor(t, cp.cycled, 60*time.Second, "worker 0's idle cycles")
			n, took := cp.decisions.Load()-before, time.Since(start)
			// Doublings from two idle ticks (1 ms) to MaxQuiet, then one
			// per MaxQuiet; the bound grows with the time the cycles took,
			// so that a slow machine does not fail it.
			limit := 12 + 2*int64(took/hypervisor.MaxQuiet)
			assert.LessOrEqual(t, n, limit, "decisions during 300 idle cycles (%v)", took)
			t.Logf("%d decisions during 300 idle cycles of worker 0 (%v)", n, took)
			assert.Empty(t, hv.Resizes(), "nothing to move")

			// An event ends the backoff. The next decision is held in
			// Resize, so that no other runs (and backs off again) until
			// the test has looked.
			cp.hold.Store(true)
			waitFor(t, cp.entered, 60*time.Second, "the next idle decision")
			assert.Equal(t, hypervisor.MaxQuiet, hv.Quiet(), "backed off to the bound while idle")
			submitN(t, s, a, cl, 1)
			assert.Zero(t, hv.Quiet(), "a submission ends the backoff")
			close(cp.release)
			require.NoError(t, s.WaitAll(testCtx(t)))
		})
	}
}

// Trial finding: an app_driven request for more workers than the
// destination's Limits.Max allows stayed due for ever (Due never
// returned to 0) and idle workers retried it every millisecond. It is
// now clipped to the room Max leaves, the rest dropped and logged once.
func TestAppDrivenClipsARequestToTheDestinationsMax(t *testing.T) {
	for _, tc := range []struct {
		name       string
		bWorkers   []int
		ask, moved int
	}{
		{"partly", []int{3}, 3, 1}, // b has 1 of its Max 2: one of three moves
		{"none", []int{2, 3}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			s := newSched(t, 4)
			var aw []int
			for w := range 4 {
				if !slices.Contains(tc.bWorkers, w) {
					aw = append(aw, w)
				}
			}
			a, b := newContexts(t, s, aw, tc.bWorkers)
			pol := hypervisor.NewAppDriven()
			core, logs := observer.New(zap.InfoLevel)
			hv, err := hypervisor.New(s, hypervisor.WithPolicy(pol), hypervisor.WithGetenv(noEnv), hypervisor.WithLogger(zap.New(core)))
			require.NoError(t, err)
			defer hv.Close()
			require.NoError(t, hv.Register(a, hypervisor.Limits{}))
			require.NoError(t, hv.Register(b, hypervisor.Limits{Max: 2}))
			require.NoError(t, pol.OnTag(42, a, b, tc.ask))
			require.NoError(t, s.Submit(ctx, clTag(), scheduler.InContext(a), scheduler.WithTag(42)))
			require.NoError(t, s.WaitAll(ctx))
			// The tagged task's decision ran on its worker before WaitAll
			// returned; ResizeNow waits for any decision under way.
			hv.ResizeNow()
			assert.Zero(t, pol.Due(), "nothing left due: no retries")
			assert.Len(t, hv.Resizes(), tc.moved)
			assert.Len(t, b.Workers(), len(tc.bWorkers)+tc.moved)
			assert.Equal(t, 1, logs.FilterMessageSnippet("the rest of the request is dropped").Len(), "the drop is logged once")
			assert.Zero(t, logs.FilterMessageSnippet("the destination is at its Limits.Max").Len(), "no move beyond Max is proposed")
			hv.ResizeNow()
			assert.Equal(t, 1, logs.FilterMessageSnippet("the rest of the request is dropped").Len(), "and not again")
		})
	}
}
