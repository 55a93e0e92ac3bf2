package static

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readyPlan has two independent clients, each on a core of its own.
const readyPlan = `
hyperepochs:
  - {name: main, period: 10ms, resources: [cpu0, cpu1], epochs: [{name: frame}]}
clients: [a, b]
runnables:
  - {name: a1, client: a, resource: cpu0, wcet: 1ms}
  - {name: b1, client: b, resource: cpu1, wcet: 1ms}
`

// slowSetup is how long client b's setup takes in these tests: far
// more than the start delay, as a loaded machine's setups took.
const slowSetup = 300 * time.Millisecond

// The first period (t0) starts the start delay after the last client is
// set up, not after it joins: client b's setup (a hook at its end, taking
// slowSetup) ends long after the start delay, and a's first frame still
// runs after it, the start delay later; a stops the run at its frame 3
// (or after, once b has run), and b, whose thread waited for t0 pinned,
// runs its first frame, and both reach the stop's period. Before, t0 was fixed 50 ms after the last client joined: a
// ran its frames 0 to 3 and stopped the run while b still set up, and b's
// thread, far behind at its first period after the stop, abandoned every
// frame (no row: the flake of TestPeriodsPerHyperepoch, accce52). In one
// process (RunLocal) and over the socket and the board (Run and
// EnterScheduler, whose ready message tells the master).
func TestFirstPeriodWaitsForTheSlowestSetup(t *testing.T) {
	plan := compileString(t, readyPlan)
	for _, socket := range []bool{false, true} {
		name := "RunLocal"
		if socket {
			name = "Run"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			dir := privateTestDir(t)
			clk := newClock()
			a, err := NewClient("a", WithClientDir(dir))
			require.NoError(t, err)
			b, err := NewClient("b", WithClientDir(dir))
			require.NoError(t, err)
			var setUp, firstRun atomic.Int64 // CLOCK_MONOTONIC ns
			var stopAsked, bRan atomic.Bool
			b.setupHook = func() {
				time.Sleep(slowSetup) // the slow setup itself
				setUp.Store(clk.now())
			}
			a.Runnable("a1", func(ctx context.Context) error {
				f, _ := Frame(ctx)
				if f == 0 {
					firstRun.Store(clk.now())
				}
				// At or after frame 3 (under load frame 3 may be skipped,
				// frameskip after an overrun), once b has run a frame:
				// on a machine loaded enough to hold a thread back
				// 100 ms, a's own thread may lag and abandon frames
				// after its stop, but b's first frame is there.
				if f >= 3 && bRan.Load() && stopAsked.CompareAndSwap(false, true) {
					a.ExitScheduler()
				}
				return nil
			})
			b.Runnable("b1", func(context.Context) error { bRan.Store(true); return nil })
			var logMu sync.Mutex
			var logged []string
			opts := []Option{WithSignals(false), WithDir(dir), WithLog(func(msg string) {
				t.Log(msg)
				logMu.Lock()
				logged = append(logged, msg)
				logMu.Unlock()
			})}
			res := make(chan masterResult, 1)
			entered := make(chan error, 2)
			if socket {
				m, err := NewMaster(plan, opts...)
				require.NoError(t, err)
				go func() {
					r, err := m.Run(ctx)
					res <- masterResult{r, err}
				}()
				for _, c := range []*Client{a, b} {
					go func() { entered <- c.EnterScheduler(ctx) }()
				}
			} else {
				go func() {
					r, err := RunLocal(ctx, plan, []*Client{a, b}, opts...)
					res <- masterResult{r, err}
				}()
			}
			var r masterResult
			select {
			case r = <-res:
			case <-ctx.Done():
				t.Fatal("the run did not end")
			}
			require.NoError(t, r.err)
			if socket {
				for range 2 {
					require.NoError(t, <-entered, "EnterScheduler")
				}
			}
			assert.Equal(t, "ExitScheduler called by client a", r.run.Stopped)
			require.NotZero(t, setUp.Load(), "b's setup hook ran")
			require.NotZero(t, firstRun.Load(), "a ran its first frame")
			assert.GreaterOrEqual(t, time.Duration(firstRun.Load()-setUp.Load()), 50*time.Millisecond,
				"a's first frame runs the start delay after b's setup ended, not during it")
			require.Len(t, r.run.Runnables, 2)
			for _, rr := range r.run.Runnables {
				require.NotEmpty(t, rr.Seq, "%s ran no frame", rr.Name)
				assert.Equal(t, int64(0), rr.Seq[0], "%s's first frame was abandoned", rr.Name)
			}
			// Both reach the stop's period: on time every frame run, or
			// (a thread held back far behind the plan after the stop)
			// the rest abandoned.
			ra, rb := r.run.Runnables[0], r.run.Runnables[1]
			assert.Equal(t, len(ra.Seq)+int(ra.Abandoned), len(rb.Seq)+int(rb.Abandoned), "both runnables reach the same period")
			logMu.Lock()
			defer logMu.Unlock()
			assert.True(t, slicesContainsPrefix(logged, "master: every client is set up ("), "the master says when every client is set up: %q", logged)
		})
	}
}

func slicesContainsPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// A client that is not ready within the setup bound (WithSetupTimeout)
// after the start aborts the run, named by the master, rather than hold
// it (and the other clients, pinned and waiting for t0) for ever; no
// frame runs. Its setup here (a hook) ends only once the master has
// aborted.
func TestClientNotReadyAbortsTheRun(t *testing.T) {
	plan := compileString(t, readyPlan)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := NewClient("a")
	require.NoError(t, err)
	b, err := NewClient("b")
	require.NoError(t, err)
	var ran atomic.Int64
	a.Runnable("a1", func(context.Context) error { ran.Add(1); return nil })
	b.Runnable("b1", func(context.Context) error { ran.Add(1); return nil })
	aborted := make(chan struct{})
	var once sync.Once
	b.setupHook = func() {
		select {
		case <-aborted:
		case <-ctx.Done():
		}
	}
	res := make(chan masterResult, 1)
	go func() {
		r, err := RunLocal(ctx, plan, []*Client{a, b}, WithSignals(false), WithLiveness(200*time.Millisecond), WithSetupTimeout(300*time.Millisecond),
			WithLog(func(msg string) {
				t.Log(msg)
				if strings.Contains(msg, "aborting the run") {
					once.Do(func() { close(aborted) })
				}
			}))
		res <- masterResult{r, err}
	}()
	var r masterResult
	select {
	case r = <-res:
	case <-ctx.Done():
		t.Fatal("the master waits for ever for a client that is not ready")
	}
	require.ErrorIs(t, r.err, ErrAborted)
	assert.Contains(t, r.err.Error(), "client b (pid ")
	assert.Contains(t, r.err.Error(), "was not ready 300ms after the start (the setup bound, WithSetupTimeout)")
	assert.NotContains(t, r.err.Error(), "client a (pid ", "client a was ready")
	assert.Zero(t, ran.Load(), "runnables ran")
	require.NotNil(t, r.run)
	for _, rr := range r.run.Runnables {
		assert.Empty(t, rr.Seq, "%s ran frames", rr.Name)
	}
}
