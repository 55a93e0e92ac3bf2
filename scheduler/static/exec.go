package static

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A RunnableFunc is a runnable's body. It runs on its resource's thread;
// a GPU runnable's body enqueues its work on the stream and returns
// without waiting for it. The context ends when the run is aborted or the
// runnable's timeout passes.
type RunnableFunc func(ctx context.Context) error

// executor runs one client's runnables: a locked OS thread per CPU
// resource (pinned to its core when the process may use it) and a
// goroutine per GPU stream that waits for the stream's marks.
type executor struct {
	plan   *Plan
	client int
	b      *board
	clk    clock
	frames int64 // periods to run; 0: until stopped
	spin   time.Duration
	alloc  *allocMeter
	warn   func(string)

	runs    []*execRunnable // this client's, by board index
	threads []*cpuThread
	streams []*streamThread
	gc      []GCPeriod
	allocs  []AllocPeriod
	gcMeter *gcMeter
	// perRun reads the allocation counters around every run (naming the
	// runnables that allocate); it costs a few hundred ns to tens of µs
	// per run, so it is a diagnostic mode (WithAllocationCounts).
	perRun bool
	// lastObjs and lastBytes are the counters at the last period's end.
	lastObjs, lastBytes, lastThreads uint64
	// abandonAfter is how long, once the run is aborted, run waits for a
	// thread in user code before it leaves it behind (gate).
	abandonAfter time.Duration
	// ready, when not nil, is called by run once every CPU resource
	// thread has started and pinned itself (the client's msgReady): the
	// threads then wait for t0 on the board (awaitT0).
	ready func()
	// pinned receives one value from each CPU thread once it is pinned.
	pinned chan struct{}
}

// defaultAbandonAfter is executor.abandonAfter when the master does not
// say (half its default liveness bound).
const defaultAbandonAfter = 500 * time.Millisecond

// A gate lets the executor leave behind a thread stuck in user code (a
// runnable's body, or a stream's Mark or WaitMark) once the run is
// aborted: a body that never returns would otherwise hold EnterScheduler,
// and the client process, forever, deaf to SIGINT and SIGTERM, which the
// client catches in the loop. The thread holds mu whenever it runs pz's
// code and releases it only around user code (leave, back), so that once
// the executor holds mu, a thread that has not ended is in user code; the
// executor then marks it abandoned, and the thread, back from user code,
// ends at once (runtime.Goexit) without touching the board, the records
// or the streams, which the client may have released by then. The mutex
// also orders the thread's writes to the records before the executor's
// reads.
type gate struct {
	mu        sync.Mutex
	abandoned bool
	done      chan struct{} // closed when the thread's loop has returned
	// Where the thread is, written before it releases mu: the user code
	// it runs, for which runnable and frame, since when.
	what  userCode
	in    *execRunnable
	frame int64
	since int64
	// row is the record's row of the run under way, should the thread
	// be left behind in it (executor.recordStuck).
	row stuckRow
}

// stuckRow is a run under way in user code: its planned start, deadline
// and start, on the clock (not from t0).
type stuckRow struct {
	planned, deadline, start int64
}

func newGate() gate { return gate{done: make(chan struct{})} }

// start takes mu for the thread's loop; the returned function, deferred,
// ends it (also after runtime.Goexit). A thread abandoned before it
// started (abandonAfter after an abort) ends at once.
func (g *gate) start() func() {
	g.mu.Lock()
	if g.abandoned {
		g.mu.Unlock()
		runtime.Goexit()
	}
	return func() {
		close(g.done)
		g.mu.Unlock()
	}
}

// leave lets the executor in while the thread runs user code, in run
// row of x's frame.
func (g *gate) leave(what userCode, x *execRunnable, frame, now int64, row stuckRow) {
	g.what, g.in, g.frame, g.since, g.row = what, x, frame, now, row
	g.mu.Unlock()
}

// back returns from user code; a thread the executor abandoned meanwhile
// ends here.
func (g *gate) back() {
	g.mu.Lock()
	if g.abandoned {
		runtime.Goexit() // the deferred end releases mu
	}
	g.in = nil
}

// execRunnable is a runnable of the executing client.
type execRunnable struct {
	idx        int // on the board
	r          PlanRunnable
	fn         RunnableFunc
	deps       []int // board indices
	submittees []*execRunnable
	stream     *streamThread // for a GPU runnable
	rec        *recorder
	skipSeq    atomic.Int64 // frameskip: the frame to skip after an overrun; -1 none
	// Where its frames fall in the run's numbering (PlacedRunnable): in
	// period k, frames k*periodFrames + frameBase + f, f < epochFrames.
	frameBase, periodFrames, epochFrames int64
	// frame is the frame the body is running (Frame reads it), and fctx
	// the context it receives, made once per run.
	frame atomic.Int64
	fctx  *frameCtx
	// submitted is, for a GPU runnable, the last frame its submitter
	// handed to the stream: an overrun known only when the work ends
	// skips the first frame not handed over yet.
	submitted atomic.Int64
}

// an item is one run of a runnable in a period: epoch frame f.
type item struct {
	r        *execRunnable
	frame    time.Duration // the frame's start from the period's start
	offset   time.Duration // planned start from the period's start
	deadline time.Duration // from the period's start
	seqBase  int64         // frame number within the period
}

type cpuThread struct {
	gate
	res       PlanResource
	period    time.Duration
	frames    int64 // epoch frames per period
	items     []item
	gcSampler bool
	err       error // first error of the thread (pinning); read after it ends
}

type streamThread struct {
	gate
	res    PlanResource
	stream Stream
	ch     chan pending
}

// pending is a submittee's enqueued work awaiting its mark.
type pending struct {
	r        *execRunnable
	seq      int64
	ticket   uint64
	planned  int64
	deadline int64
	start    int64
	skipped  bool
	err      error
	// deferred: the submittee has dependencies of its own, so the stream's
	// thread waits for them and then enqueues it, not the submitter.
	deferred bool
	// abandoned: frames from to seq are given up after a stop
	// (executor.abandon): published, not run nor recorded.
	abandoned bool
	from      int64
}

// newExecutor prepares a client's runnables; fns and streams are what
// the client registered, already checked against the plan.
func newExecutor(plan *Plan, client string, fns map[string]RunnableFunc, streams map[string]Stream, frames int64, perRun bool, warn func(string)) *executor {
	e := &executor{plan: plan, client: slices.Index(plan.Clients, client), frames: frames, spin: plan.Spin, warn: warn, alloc: newAllocMeter(), perRun: perRun,
		abandonAfter: defaultAbandonAfter}
	all := plan.Runnables()
	byName := map[string]int{}
	for i, r := range all {
		byName[r.Name] = i
	}
	mine := map[string]*execRunnable{}
	threads := map[string]*cpuThread{}
	strs := map[string]*streamThread{}
	for i, pr := range all {
		if pr.Client != client {
			continue
		}
		rows := maxRows // without a limit, the last maxRows
		if frames > 0 {
			rows = int(min(frames*pr.PeriodFrames, maxRows))
		}
		h := plan.Hyperepochs[pr.Hyperepoch]
		ep := h.Epochs[pr.Epoch]
		x := &execRunnable{idx: i, r: pr.PlanRunnable, fn: fns[pr.Name], rec: newRecorder(pr.PlanRunnable, rows),
			frameBase: pr.FrameBase, periodFrames: pr.PeriodFrames, epochFrames: int64(ep.Frames)}
		x.skipSeq.Store(-1)
		x.submitted.Store(-1)
		for _, d := range pr.Deps {
			x.deps = append(x.deps, byName[d])
		}
		mine[pr.Name] = x
		e.runs = append(e.runs, x)
		// A GPU runnable goes to its stream's thread, a CPU one to its
		// core's: one item per frame of its epoch in a period.
		res := h.Resources[slices.IndexFunc(h.Resources, func(r PlanResource) bool { return r.Name == pr.Resource })]
		if res.Kind == GPU {
			if strs[res.Name] == nil {
				strs[res.Name] = &streamThread{gate: newGate(), res: res, stream: streams[res.Name], ch: make(chan pending, 256)}
				e.streams = append(e.streams, strs[res.Name])
			}
			x.stream = strs[res.Name]
			continue
		}
		t := threads[res.Name]
		if t == nil {
			t = &cpuThread{gate: newGate(), res: res, period: h.Period, frames: pr.PeriodFrames}
			threads[res.Name] = t
			e.threads = append(e.threads, t)
		}
		for f := range ep.Frames {
			frameOff := ep.Offset + time.Duration(f)*ep.Period
			t.items = append(t.items, item{r: x, frame: frameOff, offset: frameOff + pr.Start, deadline: frameOff + pr.Deadline(), seqBase: pr.FrameBase + int64(f)})
		}
	}
	for _, x := range e.runs {
		for _, s := range x.r.Submittees {
			x.submittees = append(x.submittees, mine[s])
		}
	}
	for _, t := range e.threads {
		sort.SliceStable(t.items, func(i, j int) bool { return t.items[i].offset < t.items[j].offset })
	}
	if len(e.threads) > 0 {
		e.threads[0].gcSampler = true
		e.gc = reserve[GCPeriod](maxPeriodRecords)
		e.allocs = reserve[AllocPeriod](maxPeriodRecords)
	}
	return e
}

// samplerHyperepoch is the index of the hyperepoch whose periods number
// a client's GC and allocation records: its first CPU runnable's, in plan
// order, whose resource thread samples them (newExecutor); -1 for a
// client without CPU runnables.
func samplerHyperepoch(plan *Plan, client string) int {
	for _, pr := range plan.Runnables() {
		if pr.Client != client {
			continue
		}
		h := plan.Hyperepochs[pr.Hyperepoch]
		if i := slices.IndexFunc(h.Resources, func(r PlanResource) bool { return r.Name == pr.Resource }); i >= 0 && h.Resources[i].Kind != GPU {
			return pr.Hyperepoch
		}
	}
	return -1
}

// cpuThreads counts the resource threads of every client: one per CPU
// resource a client has runnables on.
func (p *Plan) cpuThreads() int {
	kinds := map[string]ResourceKind{}
	for _, h := range p.Hyperepochs {
		for _, r := range h.Resources {
			kinds[r.Name] = r.Kind
		}
	}
	seen := map[[2]string]bool{}
	for _, r := range p.Runnables() {
		if kinds[r.Resource] == CPU {
			seen[[2]string{r.Client, r.Resource}] = true
		}
	}
	return len(seen)
}

// run runs the client's loop on b from its t0 until the frame limit, a
// stop request or an abort, and returns the records. ctx ends the
// runnables' contexts (abort); once it has ended, run waits at most
// abandonAfter for a thread in user code, then leaves it behind (gate)
// and returns an error that names where it is stuck.
func (e *executor) run(ctx context.Context, b *board, clk clock) (runs []RunnableRun, err error) {
	e.b, e.clk = b, clk
	if len(e.threads) > 0 {
		e.gcMeter = newGCMeter()
		e.lastObjs, e.lastBytes = e.alloc.read()
		e.lastThreads = e.alloc.threads()
	}
	var wg sync.WaitGroup
	for _, s := range e.streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.streamLoop(ctx, s)
		}()
	}
	e.pinned = make(chan struct{}, len(e.threads))
	var tw sync.WaitGroup
	for _, t := range e.threads {
		tw.Add(1)
		go func() {
			defer tw.Done()
			e.cpuLoop(ctx, t)
		}()
	}
	e.awaitPinned(ctx)
	var errs []error
	var deadline time.Time // abandonAfter from the abort
	var abandoned bool
	var stuck []stuckRun // recorded once no thread of pz's writes a record
	for _, t := range e.threads {
		if st, err := e.await(ctx, &t.gate, &deadline); err != nil {
			errs = append(errs, err)
			abandoned = true
			stuck = append(stuck, st)
		}
	}
	// No thread that goes on sends to a stream: a CPU thread left behind
	// ends as soon as it is back from user code.
	for _, s := range e.streams {
		close(s.ch)
	}
	for _, s := range e.streams {
		if st, err := e.await(ctx, &s.gate, &deadline); err != nil {
			errs = append(errs, err)
			abandoned = true
			// A stream's thread is at an earlier frame of a submittee
			// than a CPU thread stuck in its body: its row goes first.
			stuck = append([]stuckRun{st}, stuck...)
		}
	}
	for _, st := range stuck {
		e.recordStuck(st)
	}
	if !abandoned {
		tw.Wait()
		wg.Wait()
	}
	for _, t := range e.threads {
		if t.err != nil {
			errs = append(errs, t.err)
		}
	}
	for _, x := range e.runs {
		runs = append(runs, x.rec.result())
	}
	return runs, joinErrors(errs)
}

// awaitPinned waits until every CPU thread has started and pinned itself
// (or the run is aborted), then says the client is ready (e.ready).
func (e *executor) awaitPinned(ctx context.Context) {
	for range e.threads {
		select {
		case <-e.pinned:
		case <-ctx.Done():
			return
		}
	}
	if e.ready != nil {
		e.ready()
	}
}

// t0Poll is how often a resource thread looks for t0 on the board while
// it waits for the other clients' setups (awaitT0): t0 comes the start
// delay (50 ms or more) ahead, so a thread finds it well before it.
const t0Poll = time.Millisecond

// awaitT0 waits for the master to publish t0 on the board, which it does
// once every client is ready (Master.clientReady), and returns it; 0 when
// the run is aborted, or asked to stop, first: the thread then ends with
// no frames, as after a stop during the start delay.
func (e *executor) awaitT0(ctx context.Context) int64 {
	for {
		if t0 := e.b.t0(); t0 != 0 {
			return t0
		}
		if e.b.aborted() || ctx.Err() != nil || e.b.stopTime() != 0 {
			return 0
		}
		sleepAbs(e.clk.now() + int64(t0Poll))
	}
}

// joinErrors joins errs on one line, "; " between them, wrapping each;
// nil if none.
func joinErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	format := strings.TrimSuffix(strings.Repeat("%w; ", len(errs)), "; ")
	args := make([]any, len(errs))
	for i, e := range errs {
		args[i] = e
	}
	return fmt.Errorf(format, args...)
}

// stuckRun is a run a thread was left behind in (await), with why.
type stuckRun struct {
	x     *execRunnable // nil: the thread was in no run
	frame int64
	row   stuckRow
	at    int64 // when it was left behind, on the clock
	err   error
}

// recordStuck records the run a thread was left behind in: it never
// ended, so its row ends when the client left it, flagged as an error
// (the message of await) and as the overruns it had made by then; without
// it the record, and the analysis, would show the run that stopped the
// client as never having started.
func (e *executor) recordStuck(st stuckRun) {
	x := st.x
	if x == nil {
		return
	}
	t0 := e.b.t0()
	flags := FlagError
	if st.at-st.row.start > int64(x.r.WCET) {
		flags |= FlagOverrunWCET
	}
	if st.at > st.row.deadline {
		flags |= FlagOverrunDeadline
	}
	if x.r.Timeout > 0 && st.at-st.row.start > int64(x.r.Timeout) {
		flags |= FlagTimeout
	}
	x.rec.addError(st.frame, st.err)
	x.rec.add(st.frame, st.row.planned-t0, st.row.deadline-t0, st.row.start-t0, st.at-t0, flags, 0, 0)
}

// await waits for a thread's loop to end; once ctx has ended (an abort),
// for at most abandonAfter from then (deadline, shared by the threads),
// after which it abandons a thread stuck in user code and says where,
// returning the run it was in.
func (e *executor) await(ctx context.Context, g *gate, deadline *time.Time) (stuckRun, error) {
	select {
	case <-g.done:
		return stuckRun{}, nil
	case <-ctx.Done():
	}
	if deadline.IsZero() {
		*deadline = time.Now().Add(e.abandonAfter)
	}
	timer := time.NewTimer(time.Until(*deadline))
	defer timer.Stop()
	select {
	case <-g.done:
		return stuckRun{}, nil
	case <-timer.C:
	}
	// Past its pz code, which ends soon after an abort, the thread either
	// ended or is in user code.
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.done:
		return stuckRun{}, nil
	default:
	}
	g.abandoned = true
	var what string
	switch {
	case g.in == nil:
		return stuckRun{}, errors.New("a resource thread had not started when the run was aborted")
	case g.what == inBody:
		what = fmt.Sprintf("runnable %s has not returned from its body (frame %d", g.in.r.Name, g.frame)
	case g.what == inMark:
		what = fmt.Sprintf("stream %s has not returned from Mark (runnable %s, frame %d", g.in.stream.res.Name, g.in.r.Name, g.frame)
	case g.what == inWaitMark:
		what = fmt.Sprintf("stream %s has not returned from WaitMark (runnable %s, frame %d", g.in.stream.res.Name, g.in.r.Name, g.frame)
	}
	now := e.clk.now()
	err := fmt.Errorf("%s, %s after it began) although the run was aborted; the client leaves its thread behind (user code should return once its context ends)",
		what, time.Duration(now-g.since).Round(time.Millisecond))
	return stuckRun{x: g.in, frame: g.frame, row: g.row, at: now, err: err}, err
}

// cpuLoop is one CPU resource's thread. It stays locked to its OS thread
// to the end, so that the thread, pinned to a core, exits with it (also a
// thread left behind in a body: see gate).
func (e *executor) cpuLoop(ctx context.Context, t *cpuThread) {
	defer t.start()()
	runtime.LockOSThread()
	if err := pinThread(t.res.Index); err != nil && e.warn != nil {
		e.warn(fmt.Sprintf("%s runs unpinned: %v", t.res.Name, err))
	}
	if err := preciseTimers(); err != nil && e.warn != nil {
		e.warn(fmt.Sprintf("%s sleeps with the default timer slack: %v", t.res.Name, err))
	}
	e.pinned <- struct{}{} // buffered: one per thread
	b := e.b
	t0 := e.awaitT0(ctx)
	if t0 == 0 {
		return
	}
	period := int64(t.period)
	for k := int64(0); e.frames == 0 || k < e.frames; k++ {
		pstart := t0 + k*period
		if st := b.stopTime(); st != 0 && pstart < st && e.farBehind(e.clk.now()-pstart, period) {
			// A stop came while this thread was far behind the plan:
			// it leaves its backlog rather than run it.
			e.abandon(ctx, t, k, st)
			return
		}
		for i := range t.items {
			it := &t.items[i]
			planned := pstart + int64(it.offset)
			if !e.waitUntil(ctx, planned, pstart) {
				return
			}
			b.store(b.heartbeatWord(e.client), uint64(e.clk.now()))
			seq := k*t.frames + it.seqBase
			depSkipped, ok := e.waitDeps(ctx, it.r, seq)
			if !ok {
				return
			}
			e.runCPU(ctx, &t.gate, it, seq, t0, pstart, planned, pstart+int64(it.deadline), depSkipped)
		}
		if t.gcSampler {
			e.samplePeriod(k)
		}
	}
}

// farBehind says whether a thread late ns behind the plan at a period
// boundary after a stop was asked for abandons its backlog rather than
// run it (abandon): at two periods or more, and at least 100 ms or a
// quarter of the liveness bound (abandonAfter is half of it), whichever
// is less. A thread a little late - a loaded machine - runs the few
// periods up to the stop's boundary, so that every runnable ends at the
// same period; one whose backlog could take the liveness bound or a
// user's patience leaves it.
func (e *executor) farBehind(late, period int64) bool {
	return late >= max(2*period, min(int64(100*time.Millisecond), int64(e.abandonAfter/2)))
}

// abandon ends a CPU thread's loop at the boundary of period k, which it
// reached far behind the plan (farBehind) after a stop was asked for at
// st: rather than run the periods from k to the stop's boundary (the
// first period starting at or after st, or the frame limit), whose
// bodies an overloaded client could not run before the liveness bound,
// it runs none of them and publishes its runnables' frames of those
// periods as ended and skipped (board.abandon), so that the runnables
// of other threads and clients waiting for them go on; the record keeps
// the frames run, up to period k-1. Each runnable publishes once its
// dependencies have published its last frame (in the items' order,
// which follows the dependencies), so that a frame reads as ended only
// when what it depends on has ended, as in the loop; its submittees are
// handed to their streams' threads, which publish them the same way.
func (e *executor) abandon(ctx context.Context, t *cpuThread, k, st int64) {
	b := e.b
	last := (st - b.t0() + int64(t.period) - 1) / int64(t.period) // the stop's boundary
	if e.frames > 0 {
		last = min(last, e.frames)
	}
	last-- // the last period the master's stop runs
	if last < k {
		return
	}
	seen := map[*execRunnable]bool{}
	for i := range t.items {
		x := t.items[i].r
		if seen[x] {
			continue // a runnable of an epoch of several frames
		}
		seen[x] = true
		from := k*x.periodFrames + x.frameBase
		to := last*x.periodFrames + x.frameBase + x.epochFrames - 1
		if _, ok := e.waitDeps(ctx, x, to); !ok {
			return // aborted
		}
		b.abandon(x.idx, from, to)
		x.rec.abandoned = to - from + 1
		for _, s := range x.submittees {
			s.submitted.Store(to)
			s.stream.send(ctx, pending{r: s, seq: to, from: from, abandoned: true})
		}
	}
}

// stopPoll bounds how long a resource thread sleeps without looking at
// the board: a stop or an abort that comes while it waits for a run far
// ahead - the first period, which starts the master's start delay after
// the last client is ready (WithStartDelay: minutes, if the user says so),
// or a run late in a long period - ends the wait within it. The last
// stretch before the run is one sleep to its planned time, as before.
const stopPoll = 10 * time.Millisecond

// waitUntil waits until planned, the planned start of a run in the
// period that starts at pstart, and reports whether to make the run:
// false once the run is aborted or asked to stop at a boundary at or
// before pstart, which it notices within stopPoll while it waits (a stop
// during the start delay ends the client's loop at once, with no
// frames, as one in the loop does at the next period boundary).
func (e *executor) waitUntil(ctx context.Context, planned, pstart int64) bool {
	for {
		if e.ended(ctx, pstart) {
			return false
		}
		now := e.clk.now()
		if planned-now <= int64(stopPoll+e.spin) {
			break
		}
		sleepAbs(now + int64(stopPoll))
	}
	e.clk.sleepUntil(planned, e.spin)
	return !e.ended(ctx, pstart) // a stop may have come meanwhile
}

// ended reports whether the run is aborted, or stops at a boundary at or
// before pstart: the period starting there is not run.
func (e *executor) ended(ctx context.Context, pstart int64) bool {
	if e.b.aborted() || ctx.Err() != nil {
		return true
	}
	st := e.b.stopTime()
	return st != 0 && pstart >= st
}

// maxPeriodRecords bounds the periods with a collection, or with
// allocations, that a client records.
const maxPeriodRecords = 1 << 14

// samplePeriod records the collections and allocations of period k, read
// by the first resource thread after its last run of the period, when it
// has time to spare.
func (e *executor) samplePeriod(k int64) {
	if c, p := e.gcMeter.delta(); c > 0 && len(e.gc) < cap(e.gc) {
		e.gc = append(e.gc, GCPeriod{Period: k, Cycles: c, PauseNs: p})
	}
	o, b := e.alloc.read()
	th := e.alloc.threads()
	if (o != e.lastObjs || th != e.lastThreads) && len(e.allocs) < cap(e.allocs) {
		e.allocs = append(e.allocs, AllocPeriod{Period: k, Objects: o - e.lastObjs, Bytes: b - e.lastBytes,
			NewThreads: th - min(th, e.lastThreads), ExitedThreads: e.lastThreads - min(th, e.lastThreads)})
	}
	e.lastObjs, e.lastBytes, e.lastThreads = o, b, th
}

// waitDeps waits until every dependency finished frame seq; it reports
// whether one was skipped, and false when the run is aborted.
func (e *executor) waitDeps(ctx context.Context, x *execRunnable, seq int64) (skipped, ok bool) {
	b := e.b
	for _, d := range x.deps {
		spins := 0
		for {
			if done, skip := b.frameDone(d, seq); done {
				skipped = skipped || skip
				break
			}
			if b.aborted() || ctx.Err() != nil {
				return false, false
			}
			// Spin first (a dependency in another process ends a few µs
			// away), then yield the thread in steps.
			spins++
			switch {
			case spins < 4000:
				yieldThread()
			default:
				sleepAbs(e.clk.now() + int64(20*time.Microsecond))
			}
		}
	}
	return skipped, true
}

// runCPU runs one frame of a CPU runnable and submits its submittees.
// pstart is the period's start; the submittees' planned starts and
// deadlines count from the start of the item's frame, which is not the
// period's for a frame after an epoch's first or an epoch after the first.
func (e *executor) runCPU(ctx context.Context, g *gate, it *item, seq, t0, pstart, planned, deadline int64, depSkipped bool) {
	x := it.r
	frameStart := pstart + int64(it.frame)
	skip := x.takeSkip(seq) || depSkipped && x.r.Overrun == FrameSkip
	if skip {
		now := e.clk.now()
		x.rec.add(seq, planned-t0, deadline-t0, now-t0, now-t0, FlagSkipped, 0, 0)
		e.b.finish(x.idx, seq, true)
		for _, s := range x.submittees {
			e.submitSkipped(ctx, s, seq, t0, frameStart)
		}
		return
	}
	// The start is stamped first: reading the counters takes a few
	// hundred ns, which the run time includes rather than the start.
	start := e.clk.now()
	var o0, b0, o1, b1 uint64
	if e.perRun {
		o0, b0 = e.alloc.read()
	}
	g.leave(inBody, x, seq, start, stuckRow{planned, deadline, start})
	err := call(ctx, x, seq)
	g.back()
	if e.perRun {
		o1, b1 = e.alloc.read()
	}
	end := e.clk.now()
	flags := e.overrun(x, seq, start, end, deadline)
	if err != nil {
		flags |= FlagError
		x.rec.addError(seq, err)
	}
	x.rec.add(seq, planned-t0, deadline-t0, start-t0, end-t0, flags, o1-o0, b1-b0)
	// Enqueue the submittees before publishing this runnable's end, so
	// that a waiter of both sees the work on the stream.
	for _, s := range x.submittees {
		if err != nil {
			e.submitSkipped(ctx, s, seq, t0, frameStart)
			continue
		}
		e.submit(ctx, g, s, seq, t0, frameStart)
	}
	e.b.finish(x.idx, seq, false)
}

// overrun classifies a run and arms frameskip.
func (e *executor) overrun(x *execRunnable, seq, start, end, deadline int64) int {
	flags := 0
	if end-start > int64(x.r.WCET) {
		flags |= FlagOverrunWCET
	}
	if end > deadline {
		flags |= FlagOverrunDeadline
	}
	if x.r.Timeout > 0 && end-start > int64(x.r.Timeout) {
		flags |= FlagTimeout
	}
	if flags&(FlagOverrunWCET|FlagOverrunDeadline) != 0 && x.r.Overrun == FrameSkip {
		last := seq
		if x.stream != nil {
			last = max(last, x.submitted.Load())
		}
		x.skipSeq.Store(x.nextFrame(last))
	}
	return flags
}

// nextFrame returns the runnable's first frame after its frame seq: the
// next frame of its epoch, or, after the epoch's last frame, the epoch's
// first frame in the next period. The frames in between belong to the
// other epochs of its hyperepoch, which it never reaches.
func (x *execRunnable) nextFrame(seq int64) int64 {
	if f := (seq - x.frameBase) % x.periodFrames; f+1 < x.epochFrames {
		return seq + 1
	}
	return (seq/x.periodFrames+1)*x.periodFrames + x.frameBase
}

// takeSkip reports whether frameskip skips frame seq, and if so disarms
// it. A frame at or past the armed one is skipped: a GPU runnable's
// overrun is armed by its stream's thread while its submitter may hand
// over the armed frame at the same time, and the next frame is then the
// one skipped rather than none. The compare-and-swap keeps a skip armed
// meanwhile for a later frame.
func (x *execRunnable) takeSkip(seq int64) bool {
	at := x.skipSeq.Load()
	if at < 0 || seq < at {
		return false
	}
	x.skipSeq.CompareAndSwap(at, -1)
	return true
}

// call runs a runnable's body, its panic turned into an error.
func call(ctx context.Context, x *execRunnable, seq int64) (err error) {
	x.frame.Store(seq)
	if x.fctx == nil || x.fctx.Context != ctx {
		x.fctx = &frameCtx{Context: ctx, x: x} // once per run: ctx is the run's
	}
	ctx = x.fctx
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("runnable %s panicked: %v\n%s", x.r.Name, p, debug.Stack())
		}
	}()
	if x.r.Timeout > 0 {
		// WithTimeout allocates: a runnable with a timeout is not
		// allocation-free.
		c, cancel := context.WithTimeout(ctx, x.r.Timeout)
		defer cancel()
		ctx = c
	}
	return x.fn(ctx)
}

// submit enqueues submittee s of frame seq on its stream and hands the
// mark to the stream's thread.
func (e *executor) submit(ctx context.Context, g *gate, s *execRunnable, seq, t0, frameStart int64) {
	planned := frameStart + int64(s.r.Start)
	deadline := frameStart + int64(s.r.Deadline())
	p := pending{r: s, seq: seq, planned: planned - t0, deadline: deadline - t0, start: e.clk.now() - t0}
	s.submitted.Store(seq)
	if s.takeSkip(seq) {
		p.skipped = true
	} else if len(s.deps) > 0 {
		p.deferred = true
	} else {
		row := stuckRow{planned, deadline, p.start + t0}
		g.leave(inBody, s, seq, p.start+t0, row)
		err := call(ctx, s, seq)
		g.back()
		if err == nil {
			g.leave(inMark, s, seq, e.clk.now(), row)
			p.ticket, err = s.stream.stream.Mark(ctx)
			g.back()
			if err != nil {
				err = fmt.Errorf("marking stream %s: %w", s.stream.res.Name, err)
			}
		}
		p.err = err
	}
	s.stream.send(ctx, p)
}

// userCode says which user code a thread runs (gate).
type userCode int

const (
	inBody     userCode = iota // a runnable's body
	inMark                     // a stream's Mark, after a submittee's body
	inWaitMark                 // a stream's WaitMark, for a submittee
)

// send hands p to the stream's thread, unless the run is aborted: that
// thread may be stuck in user code, its queue full.
func (st *streamThread) send(ctx context.Context, p pending) {
	select {
	case st.ch <- p:
	case <-ctx.Done():
	}
}

// submitSkipped hands the stream's thread a skipped frame of submittee s;
// frameStart is the start of the submitter's frame.
func (e *executor) submitSkipped(ctx context.Context, s *execRunnable, seq, t0, frameStart int64) {
	s.submitted.Store(seq)
	now := e.clk.now() - t0
	s.stream.send(ctx, pending{r: s, seq: seq, planned: frameStart + int64(s.r.Start) - t0, deadline: frameStart + int64(s.r.Deadline()) - t0, start: now, skipped: true})
}

// streamLoop waits for each submittee's mark in order and publishes its
// end.
func (e *executor) streamLoop(ctx context.Context, st *streamThread) {
	defer st.start()()
	var prevEnd int64
	for p := range st.ch {
		x := p.r
		if p.abandoned {
			if _, ok := e.waitDeps(ctx, x, p.seq); !ok {
				return // aborted
			}
			e.b.abandon(x.idx, p.from, p.seq)
			x.rec.abandoned = p.seq - p.from + 1
			continue
		}
		if p.skipped {
			x.rec.add(p.seq, p.planned, p.deadline, p.start, p.start, FlagSkipped, 0, 0)
			e.b.finish(x.idx, p.seq, true)
			continue
		}
		if p.deferred {
			skipped, ok := e.waitDeps(ctx, x, p.seq)
			if !ok {
				return // aborted
			}
			if skipped && x.r.Overrun == FrameSkip {
				x.rec.add(p.seq, p.planned, p.deadline, p.start, p.start, FlagSkipped, 0, 0)
				e.b.finish(x.idx, p.seq, true)
				continue
			}
			now := e.clk.now()
			p.start = now - e.b.t0()
			t0 := e.b.t0()
			row := stuckRow{p.planned + t0, p.deadline + t0, now}
			st.leave(inBody, x, p.seq, now, row)
			p.err = call(ctx, x, p.seq)
			st.back()
			if p.err == nil {
				st.leave(inMark, x, p.seq, e.clk.now(), row)
				p.ticket, p.err = st.stream.Mark(ctx)
				st.back()
				if p.err != nil {
					p.err = fmt.Errorf("marking stream %s: %w", st.res.Name, p.err)
				}
			}
		}
		flags := 0
		if p.err == nil {
			t0 := e.b.t0()
			st.leave(inWaitMark, x, p.seq, e.clk.now(), stuckRow{p.planned + t0, p.deadline + t0, max(p.start, prevEnd) + t0})
			p.err = st.stream.WaitMark(ctx, p.ticket)
			st.back()
		}
		end := e.clk.now() - e.b.t0()
		// The work starts once enqueued and once the stream's earlier
		// work has ended.
		start := max(p.start, prevEnd)
		prevEnd = end
		if p.err != nil {
			flags |= FlagError
			x.rec.addError(p.seq, p.err)
		} else {
			t0 := e.b.t0()
			flags |= e.overrun(x, p.seq, start+t0, end+t0, p.deadline+t0)
		}
		x.rec.add(p.seq, p.planned, p.deadline, start, end, flags, 0, 0)
		e.b.finish(x.idx, p.seq, false)
	}
}

// frameCtx is the context a runnable's body receives: the run's, plus the
// frame it runs (Frame), read without allocating.
type frameCtx struct {
	context.Context
	x *execRunnable
}

type frameKey struct{}

func (f *frameCtx) Value(key any) any {
	if key == (frameKey{}) {
		return f.x
	}
	return f.Context.Value(key)
}

// Frame returns the frame a runnable's body is running, from the context
// the body received (or one derived from it): frames count from 0 over
// the run, every epoch frame of every period in turn (the record's seq).
// It allocates nothing when given the body's own context. The bool is
// false, and the frame 0, for a context that is not a body's.
func Frame(ctx context.Context) (int64, bool) {
	if f, ok := ctx.(*frameCtx); ok {
		return f.x.frame.Load(), true
	}
	if x, ok := ctx.Value(frameKey{}).(*execRunnable); ok {
		return x.frame.Load(), true
	}
	return 0, false
}
