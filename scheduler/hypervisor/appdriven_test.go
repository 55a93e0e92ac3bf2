package hypervisor_test

import (
	"sync"
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

// waitingAppDriven is app_driven that counts its decisions and the
// workers' idle cycles: refused is signalled when a decision's moves
// are refused, reached is closed once the idle cycles reach target.
type waitingAppDriven struct {
	*hypervisor.AppDriven
	decisions atomic.Int64
	idle      atomic.Int64
	target    atomic.Int64 // 0: none yet
	refused   chan struct{}
	reached   chan struct{}
	once      sync.Once
}

func (p *waitingAppDriven) Resize(v *hypervisor.View) []hypervisor.Move {
	p.decisions.Add(1)
	return p.AppDriven.Resize(v)
}

func (p *waitingAppDriven) Rejected(v *hypervisor.View, rejected []hypervisor.Move) {
	p.AppDriven.Rejected(v, rejected)
	if len(rejected) > 0 {
		select {
		case p.refused <- struct{}{}:
		default:
		}
	}
}

func (p *waitingAppDriven) IdleCycle(c *scheduler.Context, worker int, idle time.Duration) bool {
	n := p.idle.Add(1)
	if target := p.target.Load(); target > 0 && n >= target {
		p.once.Do(func() { close(p.reached) })
	}
	return p.AppDriven.IdleCycle(c, worker, idle)
}

// TestAppDrivenRefusedRequestWaitsForAChange: a request refused because
// its source is at its Limits.Min stays due but is not retried at every
// idle cycle (before, idle workers ran a decision every millisecond, each
// refused and logged, for as long as the program stayed idle); a Limits
// change (Register) or a worker moved into the source by the program
// lets it through.
func TestAppDrivenRefusedRequestWaitsForAChange(t *testing.T) {
	for _, change := range []string{"limits", "move"} {
		t.Run(change, func(t *testing.T) {
			ctx := testCtx(t)
			s := newSched(t, 3)
			a, b := newContexts(t, s, []int{0, 1}, []int{2})
			pol := &waitingAppDriven{AppDriven: hypervisor.NewAppDriven(), refused: make(chan struct{}, 1), reached: make(chan struct{})}
			core, logs := observer.New(zap.InfoLevel)
			onResize, resized := resizeEvents()
			hv, err := hypervisor.New(s, hypervisor.WithPolicy(pol), hypervisor.WithGetenv(noEnv), onResize, hypervisor.WithLogger(zap.New(core)))
			require.NoError(t, err)
			defer hv.Close()
			require.NoError(t, hv.Register(a, hypervisor.Limits{Min: 2}))
			require.NoError(t, hv.Register(b, hypervisor.Limits{}))
			require.NoError(t, pol.OnTag(42, a, b, 1))
			require.NoError(t, s.Submit(ctx, clTag(), scheduler.InContext(a), scheduler.WithTag(42)))
			waitFor(t, pol.refused, 10*time.Second, "the request falls due and its move is refused (a is at its Min)")
			require.NoError(t, s.WaitAll(ctx))

			// 300 idle cycles of the three idle workers (about 100 ms):
			// before, about one decision per millisecond; now at most
			// one per 100 ms (the retry of changes no hook sees), and one
			// or two in flight when counting starts.
			d0, start := pol.decisions.Load(), time.Now()
			pol.target.Store(pol.idle.Load() + 300)
			waitFor(t, pol.reached, 30*time.Second, "300 idle cycles")
			n, took := pol.decisions.Load()-d0, time.Since(start)
			assert.LessOrEqual(t, n, 2+2*int64(took/hypervisor.MaxQuiet), "decisions while the request waited (%v)", took)
			assert.Equal(t, 1, pol.Due(), "the request is still due")
			assert.Empty(t, hv.Resizes())
			assert.Equal(t, 1, logs.FilterMessageSnippet("request waits").Len(), "the wait is logged once")

			switch change {
			case "limits":
				require.NoError(t, hv.Register(a, hypervisor.Limits{Min: 1}))
			case "move":
				require.NoError(t, s.MoveWorkers(b, a, 2))
			}
			r := nextResize(t, resized, 10*time.Second, "the change lets the request through")
			assert.Equal(t, "a->b", r.From+"->"+r.To)
			hv.ResizeNow() // after the decision that made the move
			assert.Zero(t, pol.Due())
			assert.Len(t, a.Workers(), map[string]int{"limits": 1, "move": 2}[change])
		})
	}
}
