package hypervisor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/hypervisor"
)

// A new user's trial of two "libraries" in two contexts, resized by the
// hypervisor (StarPU's sched_ctx + sc_hypervisor).

// waitCtx bounds a wait for tasks that only a resize lets run: a
// failure guard, the test waits for the tasks' completion.
func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(testCtx(t), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Trial finding: under throughput, a context emptied while it had no
// task pending (between two phases: the other library's tasks arrived
// first) never got a worker back. A receiver's speed per worker was 0
// without workers, never above the donor's, so its tasks waited for
// ever (WaitAll: "a" has 600 tasks pending and no workers).
func TestUserTrialThroughputRefillsAnEmptiedContext(t *testing.T) {
	s := newSched(t, 2)
	a, b := newContexts(t, s, []int{0}, []int{1})
	hv, err := hypervisor.New(s, hypervisor.WithPolicyName("throughput"), hypervisor.WithGetenv(noEnv), hypervisor.WithWindow(time.Millisecond))
	require.NoError(t, err)
	defer hv.Close()
	require.NoError(t, hv.Register(a, hypervisor.Limits{}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{}))
	// What the policy did between the phases: a, without tasks, gave its
	// worker to b.
	require.NoError(t, s.MoveWorkers(a, b, 0))
	submitN(t, s, a, work("tiny", 50*time.Microsecond, 1), 20)
	require.NoError(t, a.WaitAll(waitCtx(t)), "a's tasks wait for a worker")
	assert.NotEmpty(t, hv.Resizes())
}

// Trial finding: with one worker and two contexts with declared work,
// feft and gflops_rate left the worker in the context that had finished
// its phase (its declared flops not all done, so still "active") while
// the other's tasks waited without one for ever: the linear program
// found no distribution (it cannot leave a context with work without a
// worker), gflops_rate's targets gave both one worker.
func TestUserTrialOneWorkerGoesWhereTasksWait(t *testing.T) {
	for _, pol := range []string{"feft", "gflops_rate", "teft"} {
		t.Run(pol, func(t *testing.T) {
			s := newSched(t, 1)
			a, b := newContexts(t, s, []int{0}, nil)
			hv, err := hypervisor.New(s, hypervisor.WithPolicyName(pol), hypervisor.WithGetenv(noEnv),
				hypervisor.WithMaxIdle(time.Millisecond), hypervisor.WithWindow(2*time.Millisecond))
			require.NoError(t, err)
			defer hv.Close()
			require.NoError(t, hv.Register(a, hypervisor.Limits{TotalFlops: 1e9}))
			require.NoError(t, hv.Register(b, hypervisor.Limits{TotalFlops: 1e9}))
			cl := work("long", time.Millisecond, 1e6)
			submitN(t, s, a, cl, 3)
			submitN(t, s, b, cl, 3)
			require.NoError(t, s.WaitAll(waitCtx(t)), "b's tasks wait for a's worker")
			// And back to a for its next phase.
			submitN(t, s, a, cl, 3)
			require.NoError(t, a.WaitAll(waitCtx(t)), "a's next phase waits for the worker")
		})
	}
}

// Trial finding: Register accepted a context holding more workers than
// its Max, and nothing ever brought it down: idle, ispeed, throughput
// and app_driven never move a worker out to honour a Max, and feft's
// program found no distribution at all (the maximums add up to 4
// workers, 5 must be placed), so it resized none of the contexts, with
// an Info line as the only sign.
func TestUserTrialRegisterRefusesMaxBelowItsWorkers(t *testing.T) {
	s := newSched(t, 5)
	a, b := newContexts(t, s, []int{0, 1, 2}, []int{3})
	hv, err := hypervisor.New(s, hypervisor.WithPolicyName("feft"), hypervisor.WithGetenv(noEnv))
	require.NoError(t, err)
	defer hv.Close()
	err = hv.Register(a, hypervisor.Limits{Max: 2})
	require.ErrorIs(t, err, hypervisor.ErrBadContext)
	for _, want := range []string{`context "a"`, "Limits.Max 2", "3 workers", "move 1 out first"} {
		assert.Contains(t, err.Error(), want)
	}
	// Valid: a Max equal to its workers, and maximums that add up to
	// fewer than the scheduler's 5 workers (worker 4 stays in the global
	// context, which the hypervisor never touches).
	require.NoError(t, hv.Register(a, hypervisor.Limits{Max: 3, TotalFlops: 1e6}))
	require.NoError(t, hv.Register(b, hypervisor.Limits{Max: 1, TotalFlops: 1e9}))
	// Lowering a Max below what the context holds is refused the same way.
	require.ErrorIs(t, hv.Register(a, hypervisor.Limits{Max: 1}), hypervisor.ErrBadContext)
	// b's far larger work would take every worker; its Max lets it keep one.
	assert.Empty(t, hv.ResizeNow())
	assert.Len(t, b.Workers(), 1)
	assert.Len(t, a.Workers(), 3)
}

// limitsWatch checks, at every resize, each context's size against its
// Limits (Workers counts those moving in: what the move decided).
type limitsWatch struct {
	ctxs  []*scheduler.Context
	lims  []hypervisor.Limits
	mu    sync.Mutex
	wrong []string
}

func (w *limitsWatch) onResize(r hypervisor.Resize) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, c := range w.ctxs {
		n, l := len(c.Workers()), w.lims[i]
		if l.Max > 0 && n > l.Max || n < l.Min {
			w.wrong = append(w.wrong, fmt.Sprintf("%v has %d workers, limits %d..%d, after %+v", c, n, l.Min, l.Max, r))
		}
	}
}

// Two libraries, one with long tasks and one with many tiny ones, then
// the other way round, under each policy, with 1, 2 and 5 workers: every
// task runs (no context left without the workers its tasks wait for)
// and every resize keeps the contexts within their Limits.
func TestUserTrialPhasesWithinLimits(t *testing.T) {
	type setup struct {
		n      int
		a, b   []int
		la, lb hypervisor.Limits
	}
	setups := []setup{
		{1, []int{0}, nil, hypervisor.Limits{}, hypervisor.Limits{}},
		{2, []int{0}, []int{1}, hypervisor.Limits{}, hypervisor.Limits{}},
		{2, []int{0}, []int{1}, hypervisor.Limits{Min: 1}, hypervisor.Limits{Min: 1}},
		{5, []int{0, 1}, []int{2, 3}, hypervisor.Limits{Max: 2}, hypervisor.Limits{Max: 3}},
		{5, []int{0}, []int{1, 2, 3}, hypervisor.Limits{Min: 1, Max: 3}, hypervisor.Limits{Min: 1, Max: 3}},
	}
	for _, pol := range []string{"idle", "gflops_rate", "ispeed", "throughput", "feft", "teft"} {
		for _, su := range setups {
			t.Run(fmt.Sprintf("%s/%d/%v%v", pol, su.n, su.la, su.lb), func(t *testing.T) {
				ctx := waitCtx(t)
				s := newSched(t, su.n)
				a, b := newContexts(t, s, su.a, su.b)
				long, tiny := work("long", time.Millisecond, 1e6), work("tiny", 20*time.Microsecond, 2e4)
				total := 10*1e6 + 100*2e4
				su.la.TotalFlops, su.lb.TotalFlops = total, total
				w := &limitsWatch{ctxs: []*scheduler.Context{a, b}, lims: []hypervisor.Limits{su.la, su.lb}}
				hv, err := hypervisor.New(s, hypervisor.WithPolicyName(pol), hypervisor.WithGetenv(noEnv), hypervisor.WithOnResize(w.onResize),
					hypervisor.WithMaxIdle(time.Millisecond), hypervisor.WithWindow(2*time.Millisecond))
				require.NoError(t, err)
				defer hv.Close()
				require.NoError(t, hv.Register(a, su.la))
				require.NoError(t, hv.Register(b, su.lb))
				for phase := 0; phase < 2; phase++ {
					ca, cb := long, tiny
					if phase == 1 {
						ca, cb = tiny, long
					}
					var wg sync.WaitGroup
					for _, lib := range []struct {
						c  *scheduler.Context
						cl *scheduler.Codelet
					}{{a, ca}, {b, cb}} {
						wg.Add(1)
						go func() {
							defer wg.Done()
							n := 10
							if lib.cl == tiny {
								n = 100
							}
							for i := 0; i < n; i++ {
								if err := s.Submit(ctx, lib.cl, scheduler.InContext(lib.c)); err != nil {
									t.Error(err)
									return
								}
							}
						}()
					}
					wg.Wait()
					require.NoError(t, s.WaitAll(ctx), "phase %d", phase)
				}
				require.NoError(t, hv.Close())
				w.mu.Lock()
				defer w.mu.Unlock()
				assert.Empty(t, w.wrong)
			})
		}
	}
}

// Trial finding (documentation): a context the idle policy emptied
// between two phases stayed empty after the hypervisor's Close, and the
// next phase's tasks waited for ever; nothing said so. Close's and
// Limits' docs now do; Min 1 keeps a worker there.
func TestUserTrialEmptiedContextStaysEmptyAfterClose(t *testing.T) {
	for _, min := range []int{0, 1} {
		t.Run(fmt.Sprint("min", min), func(t *testing.T) {
			s := newSched(t, 3)
			a, b := newContexts(t, s, []int{0}, []int{1, 2})
			onResize, resized := resizeEvents()
			hv, err := hypervisor.New(s, hypervisor.WithPolicyName("idle"), hypervisor.WithGetenv(noEnv), onResize, hypervisor.WithMaxIdle(time.Millisecond))
			require.NoError(t, err)
			require.NoError(t, hv.Register(a, hypervisor.Limits{}))
			require.NoError(t, hv.Register(b, hypervisor.Limits{Min: min}))
			// b has nothing to do while a has a backlog: b's idle workers move.
			// (The backlog is topped up until they have moved.)
			ctx, long := waitCtx(t), work("long", 2*time.Millisecond, 1)
			for moved := 0; moved < 2-min; {
				submitN(t, s, a, long, 5)
				select {
				case <-resized:
					moved++
				case <-time.After(10 * time.Millisecond):
				case <-ctx.Done():
					t.Fatalf("b's idle workers did not move (%d moved)", moved)
				}
			}
			require.NoError(t, a.WaitAll(waitCtx(t)))
			require.NoError(t, hv.Close())
			require.Len(t, b.Workers(), min)
			if min == 0 {
				require.NoError(t, s.MoveWorkers(a, b, a.Workers()[0]), "the program moves a worker back")
			}
			submitN(t, s, b, work("tiny", 0, 1), 5)
			require.NoError(t, b.WaitAll(waitCtx(t)))
		})
	}
}
