package static

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// overrunPlan: slow (WCET 1ms) overruns in frame 3; after it, fast.
func overrunPlan(t *testing.T, policy Policy) *Plan {
	return compileString(t, fmt.Sprintf(`
overrun: %s
hyperepochs:
  - {name: main, period: 10ms, resources: [cpu0, cpu1], epochs: [{name: frame}]}
clients: [c]
runnables:
  - {name: slow, client: c, resource: cpu0, wcet: 1ms}
  - {name: after, client: c, resource: cpu1, wcet: 1ms, deps: [slow]}
  - {name: free, client: c, resource: cpu1, wcet: 1ms}
`, policy))
}

func runOverrun(t *testing.T, policy Policy) *Run {
	plan := overrunPlan(t, policy)
	c, _ := NewClient("c")
	n := 0
	c.Runnable("slow", func(context.Context) error {
		n++
		if n == 4 { // frame 3
			time.Sleep(3 * time.Millisecond)
		}
		return nil
	})
	c.Runnable("after", func(context.Context) error { return nil })
	c.Runnable("free", func(context.Context) error { return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := runLocal(ctx, plan, []*Client{c}, WithFrames(8))
	require.NoError(t, err)
	return run
}

func byName(r *Run) map[string]RunnableRun {
	m := map[string]RunnableRun{}
	for _, rr := range r.Runnables {
		m[rr.Name] = rr
	}
	return m
}

// firstLong returns the first frame in which rr ran for at least d, or -1.
func firstLong(rr RunnableRun, d time.Duration) int {
	for f := range rr.Seq {
		if rr.End[f]-rr.Start[f] >= int64(d) {
			return f
		}
	}
	return -1
}

func TestOverrunFrameSkip(t *testing.T) {
	r := byName(runOverrun(t, FrameSkip))
	slow, after, free := r["slow"], r["after"], r["free"]
	require.Len(t, slow.Seq, 8)
	// The 3 ms run: the fourth slow ran (frame 3, later if a loaded
	// machine made an earlier frame overrun and skip).
	long := firstLong(slow, 2500*time.Microsecond)
	require.GreaterOrEqual(t, long, 3, "%v", slow.Flags)
	require.Less(t, long, 7)
	assert.NotZero(t, slow.Flags[long]&FlagOverrunWCET)
	// The next frame of slow and of what depends on it is skipped; what
	// does not depend on it runs.
	assert.NotZero(t, slow.Flags[long+1]&FlagSkipped)
	assert.NotZero(t, after.Flags[long+1]&FlagSkipped)
	// The policy in every frame: a runnable skips a frame exactly when it
	// overran in the one before, or one of its dependencies skipped this
	// one (overruns of a loaded machine included).
	over := func(rr RunnableRun, f int) bool {
		return f >= 0 && rr.Flags[f]&(FlagOverrunWCET|FlagOverrunDeadline) != 0
	}
	skip := func(rr RunnableRun, f int) bool { return rr.Flags[f]&FlagSkipped != 0 }
	for f := range 8 {
		assert.Equal(t, over(slow, f-1), skip(slow, f), "slow, frame %d: %v", f, slow.Flags)
		assert.Equal(t, over(after, f-1) || skip(slow, f), skip(after, f), "after, frame %d: %v", f, after.Flags)
		assert.Equal(t, over(free, f-1), skip(free, f), "free, frame %d: %v", f, free.Flags)
	}
	a := Analyze(&Run{Runnables: []RunnableRun{slow, after, free}})
	assert.GreaterOrEqual(t, a.Overruns, 1)
	assert.GreaterOrEqual(t, a.Skipped, 2)
}

// TestNextFrame: a runnable's next frame is the next of its epoch, or
// after the epoch's last one its epoch's first in the next period, never
// a frame of another epoch.
func TestNextFrame(t *testing.T) {
	// Three epochs of 2, 1 and 2 frames: five frames a period, A in 0-1,
	// B in 2, C in 3-4.
	a := &execRunnable{frameBase: 0, periodFrames: 5, epochFrames: 2}
	b := &execRunnable{frameBase: 2, periodFrames: 5, epochFrames: 1}
	c := &execRunnable{frameBase: 3, periodFrames: 5, epochFrames: 2}
	one := &execRunnable{frameBase: 0, periodFrames: 1, epochFrames: 1}
	for i, tc := range []struct {
		x         *execRunnable
		seq, want int64
	}{
		{a, 0, 1}, {a, 1, 5}, {a, 5, 6}, {a, 6, 10},
		{b, 2, 7}, {b, 7, 12},
		{c, 3, 4}, {c, 4, 8}, {c, 8, 9}, {c, 9, 13},
		{one, 0, 1}, {one, 7, 8},
	} {
		assert.Equal(t, tc.want, tc.x.nextFrame(tc.seq), "case %d: frame after %d", i, tc.seq)
	}
}

// checkFrameSkip checks frameskip row by row: a runnable skips its next
// frame (its next row) exactly when it overran, or when a dependency
// skipped that frame. Overruns of a loaded machine obey it too.
func checkFrameSkip(t *testing.T, rr RunnableRun, deps ...RunnableRun) {
	t.Helper()
	skipped := func(r RunnableRun, seq int64) bool {
		i := slices.Index(r.Seq, seq)
		return i >= 0 && r.Flags[i]&FlagSkipped != 0
	}
	for i := range rr.Seq {
		over := i > 0 && rr.Flags[i-1]&(FlagOverrunWCET|FlagOverrunDeadline) != 0
		depSkip := false
		for _, d := range deps {
			depSkip = depSkip || skipped(d, rr.Seq[i])
		}
		assert.Equal(t, over || depSkip, rr.Flags[i]&FlagSkipped != 0, "%s, frame %d: seq %v, flags %v", rr.Name, rr.Seq[i], rr.Seq, rr.Flags)
	}
}

// TestFrameSkipAcrossEpochs: in a hyperepoch of several epochs, an
// overrun skips the runnable's own next frame: in its epoch, or after the
// epoch's last frame the first of the next period, the frames between
// being other epochs'. (frameskip once armed frame seq+1, which there is
// another epoch's, so nothing was ever skipped.)
func TestFrameSkipAcrossEpochs(t *testing.T) {
	plan := compileString(t, `
hyperepochs:
  - name: h
    period: 20ms
    resources: [cpu0, cpu1]
    epochs:
      - {name: A, frames: 2, period: 4ms}
      - {name: B, period: 4ms}
      - {name: C, frames: 2, period: 4ms}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, epoch: A, wcet: 500us}
  - {name: d, client: c, resource: cpu1, epoch: A, wcet: 500us, deps: [a]}
  - {name: b, client: c, resource: cpu0, epoch: B, wcet: 500us}
  - {name: x, client: c, resource: cpu0, epoch: C, wcet: 500us}
`)
	// Five frames a period: A in 0-1, B in 2, C in 3-4. The overruns: a in
	// A's last frame (1) and in its first (10), b in the middle epoch (2),
	// x in the last epoch's last frame (4) and first (13).
	slow := map[string][]int64{"a": {1, 10}, "b": {2}, "x": {4, 13}}
	// The frame each overrun skips.
	want := map[string][]int64{"a": {5, 11}, "b": {7}, "x": {8, 14}}
	perPeriod := map[string]int{"a": 2, "b": 1, "x": 2}
	c, _ := NewClient("c")
	for _, name := range []string{"a", "b", "x"} {
		c.Runnable(name, func(ctx context.Context) error {
			f, _ := Frame(ctx)
			if slices.Contains(slow[name], f) {
				// Past its WCET of 500us, not into its next frame.
				time.Sleep(2 * time.Millisecond)
			}
			return nil
		})
	}
	c.Runnable("d", func(context.Context) error { return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := runLocal(ctx, plan, []*Client{c}, WithFrames(4))
	require.NoError(t, err)
	r := byName(run)
	for name, seqs := range want {
		rr := r[name]
		require.Len(t, rr.Seq, 4*perPeriod[name], name)
		for k, seq := range seqs {
			i := slices.Index(rr.Seq, slow[name][k])
			// The slow frame ran and overran, unless an overrun of a loaded
			// machine in the frame before skipped it.
			if rr.Flags[i]&FlagSkipped != 0 {
				continue
			}
			require.NotZero(t, rr.Flags[i]&FlagOverrunWCET, "%s overran in frame %d: %v", name, rr.Seq[i], rr.Flags)
			j := slices.Index(rr.Seq, seq)
			require.GreaterOrEqual(t, j, 0, "%s has frame %d: %v", name, seq, rr.Seq)
			assert.NotZero(t, rr.Flags[j]&FlagSkipped, "%s skips frame %d: seq %v, flags %v", name, seq, rr.Seq, rr.Flags)
		}
		checkFrameSkip(t, rr)
	}
	checkFrameSkip(t, r["d"], r["a"])
	a := Analyze(run)
	assert.GreaterOrEqual(t, a.Skipped, 5)
}

// TestGPUFrameSkipAcrossEpochs: a GPU runnable whose work overruns in its
// epoch's last frame skips its epoch's first frame of the next period,
// the first one its submitter had not handed over yet.
func TestGPUFrameSkipAcrossEpochs(t *testing.T) {
	plan := compileString(t, `
hyperepochs:
  - name: h
    period: 12ms
    resources: [cpu0, cpu1, gpu0.stream0]
    epochs:
      - {name: A, frames: 2, period: 4ms}
      - {name: B, period: 4ms}
clients: [c]
runnables:
  - {name: sub, client: c, resource: cpu0, epoch: A, wcet: 100us}
  - {name: k,   client: c, resource: gpu0.stream0, epoch: A, wcet: 1ms, submitter: sub}
  - {name: w,   client: c, resource: cpu1, epoch: A, wcet: 500us, deps: [k], overrun: noskip}
  - {name: b,   client: c, resource: cpu0, epoch: B, wcet: 100us}
`)
	stream := NewHostStream()
	defer stream.Close()
	c, _ := NewClient("c")
	c.Runnable("sub", func(context.Context) error { return nil })
	c.Runnable("k", func(ctx context.Context) error {
		f, _ := Frame(ctx)
		stream.Enqueue(func() {
			if f == 1 { // A's last frame of the first period
				time.Sleep(3 * time.Millisecond)
			}
		})
		return nil
	})
	c.Runnable("w", func(context.Context) error { return nil })
	c.Runnable("b", func(context.Context) error { return nil })
	c.Resource("gpu0.stream0", stream)
	run, err := runLocal(context.Background(), plan, []*Client{c}, WithFrames(4))
	require.NoError(t, err)
	r := byName(run)
	k, sub := r["k"], r["sub"]
	require.Len(t, k.Seq, 8)
	require.Equal(t, k.Seq, sub.Seq)
	slow := slices.Index(k.Seq, 1)
	if k.Flags[slow]&FlagSkipped != 0 {
		t.Skipf("a loaded machine skipped frame 1: %v", k.Flags)
	}
	require.NotZero(t, k.Flags[slow]&FlagOverrunWCET, "frame 1 overran: %v", k.Flags)
	// The first frame the submitter had not started when the slow work
	// ended is skipped: frame 3 (A's first of the next period) or, were
	// the work known later, one after it.
	next := -1
	for i := slow + 1; i < len(k.Seq); i++ {
		if sub.Start[i] >= k.End[slow] {
			next = i
			break
		}
	}
	require.Positive(t, next, "the submitter ran on after the overrun")
	assert.NotZero(t, k.Flags[next]&FlagSkipped, "frame %d (the first not handed over) is skipped: seq %v, flags %v", k.Seq[next], k.Seq, k.Flags)
}

// TestPeriodsPerHyperepoch: the record counts the periods each hyperepoch
// started; Periods is the most of them. A frame limit runs that many of
// every hyperepoch; a stop ends each at its own period boundary, so the
// shorter period has started more.
func TestPeriodsPerHyperepoch(t *testing.T) {
	plan := compileString(t, `
overrun: noskip
hyperepochs:
  - {name: fast, period: 2ms, resources: [cpu0], epochs: [{name: f}]}
  - {name: slow, period: 4ms, resources: [cpu1], epochs: [{name: s, frames: 2}]}
clients: [c]
runnables:
  - {name: a, client: c, resource: cpu0, epoch: f, wcet: 100us}
  - {name: b, client: c, resource: cpu1, epoch: s, wcet: 100us}
`)
	newClient := func(stopAt int64) *Client {
		c, _ := NewClient("c")
		c.Runnable("a", func(ctx context.Context) error {
			if f, _ := Frame(ctx); f == stopAt {
				c.ExitScheduler()
			}
			return nil
		})
		c.Runnable("b", func(context.Context) error { return nil })
		return c
	}
	// Each hyperepoch's count agrees with its runnable's last frame.
	check := func(run *Run) {
		t.Helper()
		require.Len(t, run.Hyperepochs, 2)
		r := byName(run)
		// A runnable's periods: its last frame's, none if it ran none
		// (on a loaded machine b's thread may not have run before the
		// stop: CI's run of 2026-11-29, b abandoned its 94 periods).
		periods := func(seq []int64, per int64) int64 {
			if len(seq) == 0 {
				return 0
			}
			return seq[len(seq)-1]/per + 1
		}
		// A runnable without a row abandoned its frames (its thread
		// reached its first period far behind the plan after the stop)
		// and the analysis names it; none is silently missing.
		for _, name := range []string{"a", "b"} {
			assert.Positive(t, int64(len(r[name].Seq))+r[name].Abandoned, "%s ran or abandoned its frames up to the stop", name)
			if len(r[name].Seq) == 0 {
				assert.Contains(t, Analyze(run).NoFrame, name)
			}
		}
		fast, slow := run.Hyperepochs[0], run.Hyperepochs[1]
		assert.Equal(t, "fast", fast.Name)
		assert.EqualValues(t, periods(r["a"].Seq, 1), fast.Periods)
		assert.EqualValues(t, periods(r["b"].Seq, 2), slow.Periods)
		assert.Equal(t, max(fast.Periods, slow.Periods), run.Periods)
		require.Len(t, run.Clients, 1)
		assert.Equal(t, "fast", run.Clients[0].PeriodsOf, "c's first CPU runnable, a, samples in fast's periods")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := runLocal(ctx, plan, []*Client{newClient(-1)}, WithFrames(5))
	require.NoError(t, err)
	check(run)
	assert.Equal(t, 5, run.Hyperepochs[0].Periods)
	assert.Equal(t, 5, run.Hyperepochs[1].Periods)
	assert.Equal(t, 5, run.Periods)

	run, err = runLocal(ctx, plan, []*Client{newClient(20)})
	require.NoError(t, err)
	check(run)
	// check compared each hyperepoch's count with its own runnable's
	// frames. Which of the two started more periods depends on how soon
	// the master hears the stop: a at frame 20 stops its own periods at
	// once, b's go on to the master's boundary (on a loaded machine, CI's
	// run of 2026-11-29, 61 periods of b's 4 ms against a's 21).
	assert.GreaterOrEqual(t, run.Hyperepochs[0].Periods, 21)
}

func TestOverrunNoSkip(t *testing.T) {
	r := byName(runOverrun(t, NoSkip))
	slow, after := r["slow"], r["after"]
	assert.NotZero(t, slow.Flags[3]&FlagOverrunWCET)
	for f := range 8 {
		assert.Zero(t, slow.Flags[f]&FlagSkipped, "frame %d", f)
		assert.Zero(t, after.Flags[f]&FlagSkipped, "frame %d", f)
	}
	// after ran late in frame 3, once slow ended.
	assert.GreaterOrEqual(t, after.Start[3], slow.End[3])
	assert.Greater(t, after.Start[3]-after.Planned[3], int64(time.Millisecond))
}

func TestTimeoutCancelsContext(t *testing.T) {
	plan := compileString(t, `
hyperepochs:
  - {name: main, period: 10ms, resources: [cpu0], epochs: [{name: frame}]}
clients: [c]
runnables:
  - {name: wait, client: c, resource: cpu0, wcet: 2ms, timeout: 1ms, overrun: noskip}
`)
	c, _ := NewClient("c")
	var canceled atomic.Int64
	c.Runnable("wait", func(ctx context.Context) error {
		<-ctx.Done() // ends only by the timeout
		canceled.Add(1)
		return ctx.Err()
	})
	run, err := runLocal(context.Background(), plan, []*Client{c}, WithFrames(3))
	require.NoError(t, err)
	assert.EqualValues(t, 3, canceled.Load())
	a := Analyze(run)
	require.Len(t, a.Runnables, 1)
	assert.Equal(t, 3, a.Runnables[0].Timeouts)
	assert.Equal(t, 3, a.Runnables[0].Errors)
	assert.Contains(t, run.Runnables[0].Errors[0], "deadline exceeded")
	// Each kept error names its frame; the analysis quotes the first.
	for i, e := range run.Runnables[0].Errors {
		assert.True(t, strings.HasPrefix(e, fmt.Sprintf("frame %d: ", run.Runnables[0].Seq[i])), e)
	}
	assert.Equal(t, run.Runnables[0].Errors[0], a.Runnables[0].FirstError)
	var text strings.Builder
	require.NoError(t, a.WriteText(&text))
	assert.Contains(t, text.String(), "wait returned an error 3 times; the first, frame 0: context deadline exceeded\n")
}

func TestExitSchedulerFromRunnable(t *testing.T) {
	plan := compileString(t, threeClients)
	var clients []*Client
	var ran [4]atomic.Int64
	for i, name := range []string{"a", "b", "c"} {
		c, _ := NewClient(name)
		clients = append(clients, c)
		_ = i
	}
	clients[0].Runnable("a1", func(context.Context) error {
		if ran[0].Add(1) == 10 {
			clients[0].ExitScheduler()
		}
		return nil
	})
	clients[0].Runnable("a2", func(context.Context) error { ran[1].Add(1); return nil })
	clients[1].Runnable("b1", func(context.Context) error { ran[2].Add(1); return nil })
	clients[2].Runnable("c1", func(context.Context) error { ran[3].Add(1); return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := runLocal(ctx, plan, clients)
	require.NoError(t, err)
	assert.Contains(t, run.Stopped, "ExitScheduler called by client a")
	// The period in which it was called ran to its end, on every runnable
	// (a later one if a1 ran late on a loaded machine).
	assert.GreaterOrEqual(t, assertSamePeriods(t, run), 10)
}

// The board shows a client's stop before its message with the reason
// reaches the master; the master's watch may see the board first. The run
// then says the client's reason, not the generic one.
func TestStopReasonAfterBoard(t *testing.T) {
	plan := compileString(t, threeClients)
	m, err := NewMaster(plan)
	require.NoError(t, err)
	m.b = newBoard(len(plan.Runnables()), len(plan.Clients))
	require.True(t, m.requestStop(clientAskedStop))
	require.True(t, m.requestStop("ExitScheduler called by client a"))
	assert.Equal(t, "ExitScheduler called by client a", m.stopped)
	// A later generic request or a second reason keeps the first reason.
	require.True(t, m.requestStop(clientAskedStop))
	require.True(t, m.requestStop("ExitScheduler called by client b"))
	assert.Equal(t, "ExitScheduler called by client a", m.stopped)
}

func TestCancelStopsGracefully(t *testing.T) {
	plan := compileString(t, threeClients)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var clients []*Client
	for _, regs := range [][]string{{"a1", "a2"}, {"b1"}, {"c1"}} {
		c, _ := NewClient(regs[0][:1])
		for _, r := range regs {
			n := 0
			c.Runnable(r, func(context.Context) error {
				n++
				if r == "b1" && n == 5 {
					cancel()
				}
				return nil
			})
		}
		clients = append(clients, c)
	}
	run, err := runLocal(ctx, plan, clients)
	require.NoError(t, err)
	assert.Contains(t, run.Stopped, "was stopped (context canceled)")
	assertSamePeriods(t, run)
}

// The loop allocates nothing of its own: runnables that do not allocate
// are reported as such.
func TestLoopDoesNotAllocate(t *testing.T) {
	plan := compileString(t, threeClients)
	var clients []*Client
	for _, regs := range [][]string{{"a1", "a2"}, {"b1"}, {"c1"}} {
		c, _ := NewClient(regs[0][:1])
		for _, r := range regs {
			c.Runnable(r, func(context.Context) error { return nil })
		}
		clients = append(clients, c)
	}
	// The three clients share this process, whose allocation counters
	// they read: an object the runtime makes for itself (or publishes
	// late from a P's cache) during one period reads as that period's,
	// on a machine as loaded as CI's about one run in ten (4 objects,
	// 448 bytes, in one late period of every client). Code of the loop
	// that allocated would do so in every period of every run: so of
	// three runs of 50 periods, one must be clean.
	for _, perRun := range []bool{false, true} {
		opts := []Option{WithFrames(50)}
		if perRun {
			opts = append(opts, WithAllocationCounts())
		}
		var dirty []string
		for range 3 {
			run, err := runLocal(context.Background(), plan, clients, opts...)
			require.NoError(t, err)
			a := Analyze(run)
			assert.Equal(t, perRun, a.PerRun)
			if len(a.Allocating) == 0 && len(a.AllocatingClients) == 0 {
				dirty = nil
				break
			}
			dirty = append(dirty, fmt.Sprintf("runnables %v, clients %v: %+v", a.Allocating, a.AllocatingClients, run.Clients))
		}
		assert.Empty(t, dirty, "per run %v: no run of three was clean", perRun)
	}
	// A runnable that allocates is named.
	plan2 := compileString(t, `
overrun: noskip
hyperepochs:
  - {name: main, period: 5ms, resources: [cpu0], epochs: [{name: frame}]}
clients: [c]
runnables:
  - {name: alloc, client: c, resource: cpu0, wcet: 1ms}
`)
	c, _ := NewClient("c")
	var sink [][]byte
	c.Runnable("alloc", func(context.Context) error { sink = append(sink, make([]byte, 4096)); return nil })
	// Per period only: the client is named.
	run, err := runLocal(context.Background(), plan2, []*Client{c}, WithFrames(20))
	require.NoError(t, err)
	a := Analyze(run)
	assert.Empty(t, a.Allocating)
	assert.Equal(t, []string{"c"}, a.AllocatingClients)
	// It allocates in every period, but the runtime publishes its
	// counts as each P's cache of a size class is refilled (4 KiB
	// objects: every other one), so not every period shows them: 4 of
	// the 16 counted under load.
	assert.GreaterOrEqual(t, a.AllocPeriods, 2)
	var text strings.Builder
	require.NoError(t, a.WriteText(&text))
	assert.Contains(t, text.String(), "run with allocation counts per run (pzrun stm run -allocs or pzrun stm master -allocs")
	// Per run: the runnable is named.
	sink = sink[:0]
	run, err = runLocal(context.Background(), plan2, []*Client{c}, WithFrames(20), WithAllocationCounts())
	require.NoError(t, err)
	a = Analyze(run)
	assert.Equal(t, []string{"alloc"}, a.Allocating)
	// The runtime publishes small allocations when a span is refilled (an
	// allocation itself), so counts are lower bounds: 4 KiB objects come
	// two to a span.
	assert.GreaterOrEqual(t, a.Runnables[0].AllocRuns, 4)
	assert.GreaterOrEqual(t, a.Runnables[0].AllocBytes, uint64(4*4096))
	assert.Equal(t, 20, len(sink))
}

// TestAllocationTextNamesBoth: with counts per run, the text names the
// allocating runnables and, beside them, the clients whose process
// allocated outside any run (it named only the runnables once any was
// named, where the JSON listed both).
func TestAllocationTextNamesBoth(t *testing.T) {
	a := &Analysis{
		PerRun:            true,
		Allocating:        []string{"plan"},
		AllocatingClients: []string{"perception", "planning"},
		Runnables: []RunnableStats{
			{Name: "detect", Client: "perception"},
			{Name: "plan", Client: "planning"},
		},
	}
	var text strings.Builder
	require.NoError(t, a.WriteText(&text))
	assert.Contains(t, text.String(), "allocating inside the loop (the collector will run and pause the process): plan\n")
	assert.Contains(t, text.String(), "the process of client perception allocated inside the loop, outside the runs of their runnables")
	assert.NotContains(t, text.String(), "clients perception, planning", "planning's allocations are plan's")
	assert.NotContains(t, text.String(), "nothing allocated")
}

// A client that sends garbage or messages out of order is disconnected
// with an error naming it; the run goes on.
func TestBadClientsDisconnected(t *testing.T) {
	plan := compileString(t, threeClients)
	dir := privateTestDir(t)
	var logs []string
	logged := make(chan string, 100)
	m, err := NewMaster(plan, WithDir(dir), WithFrames(5), WithLog(func(s string) { logged <- s }))
	require.NoError(t, err)
	res := make(chan masterResult, 1)
	go func() {
		r, err := m.Run(context.Background())
		res <- masterResult{r, err}
	}()
	dial := func() net.Conn {
		conn, err := dialMaster(context.Background(), dir, func(string) {})
		require.NoError(t, err)
		return conn
	}
	waitLog := func(sub string) {
		t.Helper()
		for {
			select {
			case s := <-logged:
				logs = append(logs, s)
				if strings.Contains(s, sub) {
					return
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no log line with %q; got %q", sub, logs)
			}
		}
	}
	// Garbage: a frame of bytes that is not JSON.
	c1 := dial()
	c1.Write([]byte{0, 0, 0, 3, 'x', 'y', 'z'})
	waitLog("sent a bad first message and was disconnected")
	c1.Close()
	// A frame announcing 1 GiB.
	c2 := dial()
	c2.Write([]byte{0x40, 0, 0, 0})
	waitLog("message of 1073741824 bytes")
	c2.Close()
	// A result before hello.
	c3 := newSockLink(dial())
	c3.send(&message{Type: msgResult, Result: &clientResult{}})
	waitLog(`sent "result" before hello`)
	c3.close()
	// The real clients still run.
	noop := func(context.Context) error { return nil }
	errs := make(chan error, 3)
	for _, regs := range [][]string{{"a1", "a2"}, {"b1"}, {"c1"}} {
		c, _ := NewClient(regs[0][:1], WithClientDir(dir))
		for _, r := range regs {
			c.Runnable(r, noop)
		}
		go func() { errs <- c.EnterScheduler(context.Background()) }()
	}
	r := waitFor(t, res, "the master")
	require.NoError(t, r.err)
	for range 3 {
		assert.NoError(t, <-errs)
	}
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add([]byte(`{"type":"hello","client":"a","runnables":["x"]}`))
	f.Add([]byte(`{"type":"result","result":{"runnables":[{"name":"x","seq":[1],"planned_ns":[1]}]}}`))
	f.Add([]byte(`{"type":"start","plan":{"format":"pz-stm"},"board":"/x"}`))
	f.Add([]byte(`{"type":""}`))
	f.Add([]byte(`[1,2]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMessage(b)
		if err != nil {
			if !errors.Is(err, errProtocol) {
				t.Fatalf("error not marked as a protocol error: %v", err)
			}
			return
		}
		if m.Type == "" {
			t.Fatal("a message without a type was accepted")
		}
		if m.Type == msgResult {
			for _, r := range m.Result.Runnables {
				if len(r.Start) != len(r.Seq) {
					t.Fatal("ragged result accepted")
				}
			}
		}
	})
}

func TestMasterDirChecks(t *testing.T) {
	plan := compileString(t, threeClients)
	open := filepath.Join(t.TempDir(), "open")
	require.NoError(t, os.Mkdir(open, 0o755))
	m, err := NewMaster(plan, WithDir(open))
	require.NoError(t, err)
	_, err = m.Run(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "others may enter it: chmod 700")

	// A second master on a directory in use is refused; the first goes on.
	dir := privateTestDir(t)
	logged := make(chan string, 16)
	m1, err := NewMaster(plan, WithDir(dir), WithLog(func(s string) { logged <- s }))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := m1.Run(ctx); done <- err }()
	for s := range logged {
		if strings.Contains(s, "master: waiting for client") {
			break
		}
	}
	m2, err := NewMaster(plan, WithDir(dir))
	require.NoError(t, err)
	_, err = m2.Run(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "a master already listens on")
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)

	// A socket left by a master that died is replaced.
	require.NoError(t, os.WriteFile(filepath.Join(dir, sockName), nil, 0o600))
	m3, err := NewMaster(plan, WithDir(dir), WithFrames(2))
	require.NoError(t, err)
	res := make(chan error, 1)
	go func() { _, err := m3.Run(context.Background()); res <- err }()
	noop := func(context.Context) error { return nil }
	errs := make(chan error, 3)
	for _, regs := range [][]string{{"a1", "a2"}, {"b1"}, {"c1"}} {
		c, _ := NewClient(regs[0][:1], WithClientDir(dir))
		for _, r := range regs {
			c.Runnable(r, noop)
		}
		go func() { errs <- c.EnterScheduler(context.Background()) }()
	}
	require.NoError(t, waitFor(t, res, "the master"))
	for range 3 {
		assert.NoError(t, <-errs)
	}
}

func TestNewMasterBadOptions(t *testing.T) {
	_, err := NewMaster(nil)
	assert.Error(t, err)
	_, err = NewMaster(compileString(t, threeClients), WithFrames(-1))
	assert.ErrorContains(t, err, "frames must be 0 (no limit) or more, got -1")
	_, err = NewMaster(compileString(t, threeClients), WithLiveness(-time.Second))
	assert.ErrorContains(t, err, "static: WithLiveness(-1s): want a duration >= 0")
	_, err = NewMaster(compileString(t, threeClients), WithStartDelay(-time.Second))
	assert.ErrorContains(t, err, "static: WithStartDelay(-1s): want a duration >= 0")
	_, err = Compile(nil)
	assert.ErrorContains(t, err, "static: Compile of a nil Spec")
	_, err = NewClient("")
	assert.Error(t, err)
	// A plan with a client without runnables (the compiler refuses one;
	// an older plan file may hold one): the master would wait for it.
	idle := compileString(t, threeClients)
	idle.Clients = append(idle.Clients, "ghost")
	idle.Hash = idle.hash()
	_, err = NewMaster(idle)
	assert.ErrorContains(t, err, `client "ghost" of the plan has no runnables`)
}

// A GPU runnable with dependencies of its own besides its submitter is
// enqueued only after they end.
func TestSubmitteeWaitsForItsDeps(t *testing.T) {
	plan := compileString(t, `
overrun: noskip
hyperepochs:
  - {name: main, period: 10ms, resources: [cpu0, cpu1, gpu0.stream0], epochs: [{name: frame}]}
clients: [c, d]
runnables:
  - {name: s, client: c, resource: cpu0, wcet: 100us}
  - {name: a, client: d, resource: cpu1, wcet: 4ms}
  - {name: k, client: c, resource: gpu0.stream0, wcet: 1ms, submitter: s, deps: [a]}
  - {name: w, client: d, resource: cpu1, wcet: 1ms, deps: [k]}
`)
	stream := NewHostStream()
	defer stream.Close()
	c, _ := NewClient("c")
	var aDone, kEarly atomic.Int64
	c.Runnable("s", func(context.Context) error { return nil })
	c.Runnable("k", func(context.Context) error {
		if aDone.Load() == 0 {
			kEarly.Add(1)
		}
		stream.Enqueue(func() {})
		return nil
	})
	c.Resource("gpu0.stream0", stream)
	d, _ := NewClient("d")
	d.Runnable("a", func(context.Context) error {
		time.Sleep(2 * time.Millisecond)
		aDone.Add(1)
		return nil
	})
	d.Runnable("w", func(context.Context) error { return nil })
	run, err := runLocal(context.Background(), plan, []*Client{c, d}, WithFrames(5))
	require.NoError(t, err)
	assert.Zero(t, kEarly.Load(), "k was enqueued before a ended")
	r := byName(run)
	for i := range 5 {
		assert.GreaterOrEqual(t, r["k"].Start[i], r["a"].End[i], "frame %d", i)
	}
}

func TestPlanMismatchRefused(t *testing.T) {
	plan := compileString(t, threeClients)
	other := compileString(t, strings.Replace(threeClients, "period: 5ms", "period: 6ms", 1))
	dir := privateTestDir(t)
	startMaster(t, plan, WithDir(dir), WithFrames(1))
	c, _ := NewClient("b", WithClientDir(dir), WithPlan(other))
	c.Runnable("b1", func(context.Context) error { return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.EnterScheduler(ctx)
	require.ErrorIs(t, err, ErrRefused)
	assert.Contains(t, err.Error(), "the client runs plan "+other.Hash+" (test.yaml) and the master plan "+plan.Hash+" (test.yaml): compile one schedule for both")
}

// One schedule compiled from paths spelled apart (pipe.yaml and
// ./pipe.yaml) has two hashes: the refusal says so and names both paths,
// rather than asking for one schedule.
func TestPlanPathMismatchRefused(t *testing.T) {
	s, err := Parse([]byte(threeClients), "pipe.yaml")
	require.NoError(t, err)
	plan, err := Compile(s)
	require.NoError(t, err)
	s.File = "./pipe.yaml"
	other, err := Compile(s)
	require.NoError(t, err)
	require.NotEqual(t, plan.Hash, other.Hash)
	dir := privateTestDir(t)
	startMaster(t, plan, WithDir(dir), WithFrames(1))
	c, _ := NewClient("b", WithClientDir(dir), WithPlan(other))
	c.Runnable("b1", func(context.Context) error { return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = c.EnterScheduler(ctx)
	require.ErrorIs(t, err, ErrRefused)
	assert.Contains(t, err.Error(), "the client runs plan "+other.Hash+" and the master plan "+plan.Hash+", which differ only in their source's path: the client's ./pipe.yaml, the master's pipe.yaml")
	assert.NotContains(t, err.Error(), "compile one schedule")
}

// A GPU runnable whose work overruns is known late, after its submitter
// has handed over the next frames: frameskip skips the first frame not
// handed over yet, and its waiter with it.
func TestGPUFrameSkip(t *testing.T) {
	plan := compileString(t, `
hyperepochs:
  - {name: main, period: 5ms, resources: [cpu0, cpu1, gpu0.stream0], epochs: [{name: frame}]}
clients: [c]
runnables:
  - {name: sub, client: c, resource: cpu0, wcet: 100us}
  - {name: k,   client: c, resource: gpu0.stream0, wcet: 1ms, submitter: sub}
  - {name: w,   client: c, resource: cpu1, wcet: 500us, deps: [k], overrun: noskip}
`)
	stream := NewHostStream()
	defer stream.Close()
	c, _ := NewClient("c")
	n := 0
	c.Runnable("sub", func(context.Context) error { return nil })
	c.Runnable("k", func(context.Context) error {
		n++
		slow := n == 3 // frame 2's work takes three periods
		stream.Enqueue(func() {
			if slow {
				time.Sleep(15 * time.Millisecond)
			}
		})
		return nil
	})
	c.Runnable("w", func(context.Context) error { return nil })
	c.Resource("gpu0.stream0", stream)
	run, err := runLocal(context.Background(), plan, []*Client{c}, WithFrames(16))
	require.NoError(t, err)
	r := byName(run)
	k := r["k"]
	require.Len(t, k.Seq, 16)
	// The slow one is the third frame k ran (frame 2, later if a loaded
	// machine made earlier frames overrun and skip).
	slow := firstLong(k, 10*time.Millisecond)
	require.GreaterOrEqual(t, slow, 2, "the 15 ms run: %v", k.Flags)
	assert.NotZero(t, k.Flags[slow]&FlagOverrunWCET, "frame %d overran", slow)
	// The overrun is known when the slow work ends; the first frame the
	// submitter had not started by then is the one skipped (usually a few
	// frames later: the 15 ms spanned three periods).
	sub := r["sub"]
	next := -1
	for f := slow + 1; f < len(k.Seq); f++ {
		if sub.Start[f] >= k.End[slow] {
			next = f
			break
		}
	}
	require.Positive(t, next, "the submitter ran on after the overrun")
	assert.NotZero(t, k.Flags[next]&FlagSkipped, "frame %d (the first not handed over) is skipped: %v", next, k.Flags)
}

// A body learns its frame from its context, without allocating.
func TestFrame(t *testing.T) {
	plan := compileString(t, `
overrun: noskip
hyperepochs:
  - {name: main, period: 4ms, resources: [cpu0], epochs: [{name: a, frames: 2}, {name: b}]}
clients: [c]
runnables:
  - {name: x, client: c, resource: cpu0, epoch: a, wcet: 100us}
  - {name: y, client: c, resource: cpu0, epoch: b, wcet: 100us, timeout: 1ms}
`)
	c, _ := NewClient("c")
	var xs, ys []int64
	c.Runnable("x", func(ctx context.Context) error {
		f, ok := Frame(ctx)
		if !ok {
			return errors.New("no frame")
		}
		xs = append(xs, f)
		return nil
	})
	c.Runnable("y", func(ctx context.Context) error { // a derived context (timeout)
		f, ok := Frame(ctx)
		if !ok {
			return errors.New("no frame")
		}
		ys = append(ys, f)
		return nil
	})
	run, err := runLocal(context.Background(), plan, []*Client{c}, WithFrames(3))
	require.NoError(t, err)
	// Three frames a period: x in 0, 1; y in 2.
	assert.Equal(t, []int64{0, 1, 3, 4, 6, 7}, xs)
	assert.Equal(t, []int64{2, 5, 8}, ys)
	for _, rr := range run.Runnables {
		assert.Empty(t, rr.Errors)
	}
	_, ok := Frame(context.Background())
	assert.False(t, ok)
	fc := &frameCtx{Context: context.Background(), x: &execRunnable{}}
	assert.Zero(t, testing.AllocsPerRun(100, func() { Frame(fc) }))
}

// Analyze leaves out each client's last period by the hyperepoch that
// numbers its records, and a runnable's runs in the longest hyperepoch's
// last period: with a 10 ms and a 20 ms hyperepoch stopped by a signal,
// Periods (the most of any, 145) times 20 ms lies past the run's end.
func TestAnalyzeLastPeriodsPerHyperepoch(t *testing.T) {
	ms := int64(time.Millisecond)
	run := &Run{
		Periods:     145,
		Hyperepochs: []RunHyperepoch{{Name: "fast", Period: 10 * ms, Periods: 145}, {Name: "slow", Period: 20 * ms, Periods: 73}},
		Clients: []ClientRun{
			{Name: "a", PeriodsOf: "slow", Allocs: []AllocPeriod{{Period: 72, Objects: 100}}},
			{Name: "b", PeriodsOf: "fast", Allocs: []AllocPeriod{{Period: 72, Objects: 100}}},
		},
		Runnables: []RunnableRun{{Name: "r", Client: "a", Resource: "cpu1",
			Seq: []int64{71, 72}, Planned: []int64{71 * 20 * ms, 72 * 20 * ms}, Start: []int64{71 * 20 * ms, 72 * 20 * ms},
			End: []int64{71*20*ms + ms, 72*20*ms + ms}, Flags: []int{0, 0}, AllocObjects: []uint64{0, 50}, AllocBytes: []uint64{0, 800}}},
	}
	a := Analyze(run)
	assert.Equal(t, []string{"b"}, a.AllocatingClients, "a's period 72 is its hyperepoch's last; b's is not")
	assert.Empty(t, a.Allocating, "r's run in the slow hyperepoch's last period is left out")
	// The summary gives each hyperepoch's count beside the most of any.
	var b strings.Builder
	require.NoError(t, a.WriteText(&b))
	assert.Contains(t, b.String(), "145 periods (fast 145, slow 73); stopped:")
}

// TestPlannedStartsEveryFrame: every run's planned start and deadline in
// the record is its own frame's, for GPU runnables too, in every frame of
// an epoch and in every epoch of a period: the submittee's count from its
// submitter's frame, not from the period's start. A submittee whose
// submitter failed is recorded skipped at its frame's planned start too.
func TestPlannedStartsEveryFrame(t *testing.T) {
	plan := compileString(t, `
overrun: noskip
hyperepochs:
  - name: h
    period: 24ms
    resources: [cpu0, cpu1, gpu0.stream0]
    epochs:
      - {name: A, period: 4ms}
      - {name: B, frames: 3, period: 6ms}
      - {name: C, frames: 2, period: 1ms}
clients: [c]
runnables:
  - {name: a,   client: c, resource: cpu0, epoch: A, wcet: 200us}
  - {name: sub, client: c, resource: cpu0, epoch: B, wcet: 200us}
  - {name: k,   client: c, resource: gpu0.stream0, epoch: B, wcet: 1ms, submitter: sub}
  - {name: w,   client: c, resource: cpu1, epoch: B, wcet: 200us, deps: [k]}
  - {name: s2,  client: c, resource: cpu1, epoch: C, wcet: 100us}
  - {name: g,   client: c, resource: gpu0.stream0, epoch: C, wcet: 300us, submitter: s2}
  - {name: u,   client: c, resource: cpu0, epoch: C, wcet: 100us, deps: [g]}
`)
	stream := NewHostStream()
	defer stream.Close()
	c, _ := NewClient("c")
	for _, name := range []string{"a", "w", "u"} {
		c.Runnable(name, func(context.Context) error { return nil })
	}
	// sub fails in frame 8 (B's second of period 1; a period has six
	// frames, A's 0, B's 1-3, C's 4-5): k's frame 8 is skipped.
	c.Runnable("sub", func(ctx context.Context) error {
		if f, _ := Frame(ctx); f == 8 {
			return errors.New("no input")
		}
		return nil
	})
	c.Runnable("s2", func(context.Context) error { return nil })
	for _, name := range []string{"k", "g"} {
		c.Runnable(name, func(context.Context) error {
			stream.Enqueue(func() {})
			return nil
		})
	}
	c.Resource("gpu0.stream0", stream)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const periods = 3
	run, err := runLocal(ctx, plan, []*Client{c}, WithFrames(periods))
	require.NoError(t, err)
	r := byName(run)
	h := plan.Hyperepochs[0]
	for _, pr := range plan.Runnables() {
		rr := r[pr.Name]
		ep := h.Epochs[pr.Epoch]
		require.Len(t, rr.Seq, periods*ep.Frames, pr.Name)
		for i, seq := range rr.Seq {
			k, f := seq/pr.PeriodFrames, seq%pr.PeriodFrames-pr.FrameBase
			require.True(t, f >= 0 && f < int64(ep.Frames), "%s frame %d lies in its epoch", pr.Name, seq)
			frame := k*int64(h.Period) + int64(ep.Offset) + f*int64(ep.Period)
			assert.Equal(t, frame+int64(pr.Start), rr.Planned[i], "%s frame %d: planned start", pr.Name, seq)
			assert.Equal(t, frame+int64(pr.Deadline()), rr.Deadline[i], "%s frame %d: deadline", pr.Name, seq)
		}
	}
	k := r["k"]
	i := slices.Index(k.Seq, 8)
	require.GreaterOrEqual(t, i, 0)
	assert.NotZero(t, k.Flags[i]&FlagSkipped, "k skips the frame its submitter failed: %v", k.Flags)
	// (Whether a run overran its deadline is not checked: a loaded machine
	// may make it so. Before the fix, B's later frames were held to its
	// first frame's deadline, already past: the deadlines checked above.)
}

// The analysis says "1 period" and "1 time", not "1 periods".
func TestAnalyzeTextSingular(t *testing.T) {
	a := &Analysis{Source: "s.yaml", Plan: "p", Periods: 1, Stopped: "frame limit (1 period)", GCCycles: 1, GCPeriods: 1,
		Runnables: []RunnableStats{{Name: "x", Errors: 1}, {Name: "y", Errors: 2}}}
	var b strings.Builder
	require.NoError(t, a.WriteText(&b))
	out := b.String()
	assert.Contains(t, out, "run of s.yaml (plan p): 1 period; stopped:")
	assert.Contains(t, out, "garbage collection: 1 cycle in 1 period,")
	// No collection reads as none, not "0 cycles in 0 periods, about 0
	// of pauses".
	a.GCCycles, a.GCPeriods = 0, 0
	b.Reset()
	require.NoError(t, a.WriteText(&b))
	assert.Contains(t, b.String(), "garbage collection: none during the run\n")
	assert.Contains(t, out, "x returned an error 1 time\n")
	assert.Contains(t, out, "y returned an error 2 times\n")

	// The record's reason too.
	c, _ := NewClient("c")
	c.Runnable("r", func(context.Context) error { return nil })
	run, err := runLocal(context.Background(), compileString(t, `
hyperepochs:
  - {name: h, period: 2ms, resources: [cpu0], epochs: [{name: f}]}
clients: [c]
runnables:
  - {name: r, client: c, resource: cpu0, wcet: 100us}
`), []*Client{c}, WithFrames(1))
	require.NoError(t, err)
	assert.Equal(t, "frame limit (1 period)", run.Stopped)
}

// ReadRun given a plan says it is a plan, not just a wrong format.
func TestReadRunOfAPlan(t *testing.T) {
	plan := compileString(t, threeClients)
	var b strings.Builder
	require.NoError(t, WritePlan(&b, plan))
	_, err := ReadRun(strings.NewReader(b.String()))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "this is a compiled plan (format pz-stm), not a run record")
}

func TestPanicRecordedWithFrame(t *testing.T) {
	plan := compileString(t, `
hyperepochs:
  - {name: main, period: 10ms, resources: [cpu0], epochs: [{name: frame}]}
clients: [c]
runnables:
  - {name: boom, client: c, resource: cpu0, wcet: 2ms}
`)
	c, _ := NewClient("c")
	// The second call panics; its frame is 1 unless a late start on a
	// loaded machine skipped a frame, so the body says which it was.
	var n, boomFrame atomic.Int64
	c.Runnable("boom", func(ctx context.Context) error {
		if n.Add(1) == 2 {
			f, _ := Frame(ctx)
			boomFrame.Store(f)
			panic("no camera frame")
		}
		return nil
	})
	run, err := runLocal(context.Background(), plan, []*Client{c}, WithFrames(3))
	require.NoError(t, err)
	rr := run.Runnables[0]
	require.Len(t, rr.Errors, 1)
	want := fmt.Sprintf("frame %d: runnable boom panicked: no camera frame\n", boomFrame.Load())
	assert.True(t, strings.HasPrefix(rr.Errors[0], want), rr.Errors[0])
	assert.Contains(t, rr.Errors[0], "goroutine ", "the record keeps the stack")
	var text strings.Builder
	require.NoError(t, Analyze(run).WriteText(&text))
	assert.Contains(t, text.String(), "boom returned an error 1 time; the first, "+want)
}

// assertSamePeriods checks that a stop ended every runnable at the same
// period: the frames each recorded and those its client abandoned, far
// behind the plan on a loaded machine (RunnableRun.Abandoned), come to
// the same count, which it returns.
func assertSamePeriods(t *testing.T, run *Run) int {
	t.Helper()
	require.NotEmpty(t, run.Runnables)
	n := len(run.Runnables[0].Seq) + int(run.Runnables[0].Abandoned)
	for _, rr := range run.Runnables {
		assert.Equal(t, n, len(rr.Seq)+int(rr.Abandoned), "%s: frames recorded %d, abandoned %d", rr.Name, len(rr.Seq), rr.Abandoned)
	}
	return n
}

// Analyze does not blame a client for the runtime's objects of an OS
// thread that another client of the same process saw start or end: the
// records below are those of TestLoopDoesNotAllocate's failures on a
// loaded machine (RunLocal, three clients in one process). A resource
// thread of the previous run exited (its processor went to a new
// thread), which only c saw, as the live count fell, while b saw the new
// thread's objects (2 objects, 1632 bytes: an m and its g) and no change
// in the count; and a thread counted in period 18 whose g was published
// in period 20. Another process's threads, or a start three periods
// away, excuse nothing.
func TestAnalyzeThreadChurnAcrossClients(t *testing.T) {
	ms := int64(time.Millisecond)
	run := func(clients ...ClientRun) *Run {
		return &Run{Periods: 50, Hyperepochs: []RunHyperepoch{{Name: "main", Period: 5 * ms, Periods: 50}}, Clients: clients}
	}
	a := Analyze(run(
		ClientRun{Name: "a", PID: 7, PeriodsOf: "main"},
		ClientRun{Name: "b", PID: 7, PeriodsOf: "main", Allocs: []AllocPeriod{{Period: 45, Objects: 2, Bytes: 1632}}},
		ClientRun{Name: "c", PID: 7, PeriodsOf: "main", Allocs: []AllocPeriod{{Period: 45, ExitedThreads: 1}}},
	))
	assert.Empty(t, a.AllocatingClients, "c saw a thread end in period 45")
	a = Analyze(run(
		ClientRun{Name: "a", PID: 7, PeriodsOf: "main", Allocs: []AllocPeriod{{Period: 18, NewThreads: 2}, {Period: 20, Objects: 1, Bytes: 480}}},
		ClientRun{Name: "c", PID: 7, PeriodsOf: "main", Allocs: []AllocPeriod{{Period: 17, NewThreads: 2}, {Period: 20, Objects: 1, Bytes: 480}}},
	))
	assert.Empty(t, a.AllocatingClients, "two threads started two periods before")
	a = Analyze(run(
		ClientRun{Name: "b", PID: 7, PeriodsOf: "main", Allocs: []AllocPeriod{{Period: 45, Objects: 2, Bytes: 1632}}},
		ClientRun{Name: "c", PID: 8, PeriodsOf: "main", Allocs: []AllocPeriod{{Period: 45, ExitedThreads: 1}}},
		ClientRun{Name: "d", PID: 9, PeriodsOf: "main", Allocs: []AllocPeriod{{Period: 17, NewThreads: 1}, {Period: 20, Objects: 1, Bytes: 480}}},
	))
	assert.Equal(t, []string{"b", "d"}, a.AllocatingClients, "c's thread is another process's; d's started three periods before")
	// Past the bound per thread, the objects are the client's.
	a = Analyze(run(ClientRun{Name: "b", PID: 7, PeriodsOf: "main", Allocs: []AllocPeriod{{Period: 30, Objects: 9, ExitedThreads: 1}}}))
	assert.Equal(t, []string{"b"}, a.AllocatingClients)
}

// ReadRun of a JSON file that is not a run record says what it is and
// what to analyze instead: the trace that pzrun stm analyze -trace
// writes (its error was `not a run record (format "" version 0, want
// pz-stm-run 1)`, naming neither), other JSON, and a record of another
// version.
func TestReadRunOfOtherJSON(t *testing.T) {
	var trace strings.Builder
	require.NoError(t, WriteRunTrace(&trace, &Run{Format: "pz-stm-run", Version: RunVersion,
		Clients: []ClientRun{{Name: "c"}}, Runnables: []RunnableRun{{Name: "r", Client: "c", Resource: "cpu0", Seq: []int64{0}, Planned: []int64{0},
			Deadline: []int64{1}, Start: []int64{0}, End: []int64{1}, Flags: []int{0}, AllocObjects: []uint64{0}, AllocBytes: []uint64{0}}}}))
	for _, c := range []struct{ name, src, want string }{
		{"trace", trace.String(), "static: this is a trace (Trace Event Format, what pzrun stm analyze -trace writes, for Perfetto), not a run record: analyze what -o of pzrun stm run or stm master writes"},
		{"other JSON", `{"periods": 3}`, `static: this JSON is not a run record (it has no "format": "pz-stm-run"): analyze what -o of pzrun stm run or stm master writes`},
		{"other version", fmt.Sprintf(`{"format": "pz-stm-run", "version": %d, "periods": 3}`, RunVersion+1),
			fmt.Sprintf("static: this run record is of version %d, and this pz reads version %d: analyze it with the pz (pzrun) that wrote it, or run the schedule again", RunVersion+1, RunVersion)},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadRun(strings.NewReader(c.src))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}
