package scheduler

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/internal/atomicf"
)

// Stage 4: pop and run. A worker takes the next task from its contexts'
// policies (or joins a forming team, team.go), makes its data ready on the
// worker's memory node, runs the implementation, and hands the task to
// completion (finish.go).

// A worker runs tasks on one processing unit, on the goroutine of its
// driver: one the scheduler started, or the application's (Driver). Its
// methods are called from that goroutine only.
type worker struct {
	s    *Scheduler
	info WorkerInfo
	drv  driver
	// driven is set for a worker the application drives (Driver): the
	// scheduler starts no goroutine for it.
	driven bool
	taken  atomic.Bool // its Driver was handed out
	// dstate is a driven worker's driver state: driverNew, driverInit,
	// driverDone (see Driver).
	dstate atomic.Int32
	// retired is set once a driven worker left the scheduler (its driver
	// ended, or Close gave up on a driver never initialized): it is in
	// no context and no policy, and runs nothing more (retire).
	retired atomic.Bool
	// g is the id of the goroutine the scheduler runs the worker on (0
	// for a driven worker): a wait made there is a task's (ErrInTask).
	g atomic.Uint64
	// root is the entry of the outermost function of that goroutine's
	// stack (stackRoot; 0 for a driven worker): a caller
	// whose stack has another root is not the worker, which
	// runningTask tells without goid's cost.
	root atomic.Uintptr
	// quit, when not nil, ends the worker's sleep (a Driver.Run's ctx).
	quit <-chan struct{}

	call Call
	bufs [8]*buffer

	// sleeping and wake sit on a cache line of their own: pushers read
	// sleeping on every push, and the worker writes its other fields on
	// every task.
	_        [cacheLine]byte
	sleeping atomic.Bool
	// serving is false while a driven worker's program is away from the
	// Driver calls that run tasks (Run, RunOnce, WaitAll, Submit past
	// its limit): a task queued for it then waits for the program
	// (PolicyConfig.Serving). Always true for a launched worker.
	serving atomic.Bool
	// redirected counts the tasks this device's worker handed to the CPU
	// workers: their data could not fit in its memory (WorkerStats).
	redirected atomic.Int64
	wake       chan struct{}
	_          [cacheLine]byte

	// freed gathers the tasks the worker freed, handed to the
	// submitters by the batch (taskPool.put).
	freed []*Task

	doneBatch int64
	doneTasks int64      // tasks completed by this worker, published to nTasks in batches
	scratch   scratchSet // its Scratch buffers (a GPU worker's are its slots')
	// drain, when set, completes the tasks the worker has in flight (a
	// GPU worker's), reporting whether it had any: the data layer calls
	// it before waiting for room on the worker's node.
	drain func() bool

	// With the watchdog on (WithWatchdog): the worker's completions,
	// and the codelet of the task it runs (nil: none) and since when.
	wdDone  atomic.Uint64
	wdCl    atomic.Pointer[Codelet]
	wdSince atomic.Int64

	nTasks atomic.Int64
	busyNs atomic.Int64
	idleNs atomic.Int64
	// idleStart is when the current idle period began, in ns since the
	// epoch; 0 outside one (with statistics only).
	idleStart atomic.Int64
	flops     atomicf.Float64
	events    []traceEvent

	cx workerCx // scheduling contexts (context.go)

	// once makes pop return after the worker ran its share of a team
	// task, setting ranShare, instead of looking for another task
	// (runOne).
	once, ranShare bool
}

// idle is called when the worker found nothing to do: spin briefly, then
// sleep until woken by a push or by Close.
func (w *worker) idle() {
	// Completions are published before sleeping, not at once: a worker
	// that runs dry after every task (a submitter slower than its
	// workers) would otherwise write the in-flight counter, which every
	// submission writes too, once per task. Unless a Driver that runs
	// tasks of its own asks (publishIdle): it gives this worker tasks
	// only once it sees the count fall. A long spin (WithSpin) publishes
	// after spinPublish rounds, so that WaitAll does not wait for the
	// whole spin.
	s := w.s
	if s.publishIdle.Load() {
		w.flushDone()
	}
	mb := s.cx.mon.Load()
	if mb != nil {
		w.idleCycle(mb)
	}
	stats := s.cfg.stats
	if stats {
		w.startIdle(s.now())
	}
	for i := 0; i < s.cfg.spin; i++ {
		runtime.Gosched()
		if s.stopping.Load() {
			w.endIdle(s.now())
			return
		}
		if i == spinPublish {
			w.flushDone()
		}
		if w.look(stats) {
			return
		}
	}
	// Announce sleep, then look once more: a pusher either sees the flag
	// (and wakes us) or pushed before our last look (and we find it).
	w.sleeping.Store(true)
	s.nsleep.Add(1)
	if w.look(stats) {
		if w.sleeping.CompareAndSwap(true, false) {
			s.nsleep.Add(-1)
		}
		return
	}
	// A RunOnce that joined a team may have completed its task and still
	// found nothing else: publish that completion before sleeping.
	w.flushDone()
	if !w.sleeping.Load() {
		// Woken during that last look: it joined a team (team.go), and
		// awaitTeam took the wake-up's token while the worker waited
		// for its team mates. Sleeping now, unflagged, no push could
		// wake it, and the next team would wait for it forever.
		if stats {
			w.endIdle(s.now())
		}
		return
	}
	// Load the monitor after announcing sleep: SetMonitor stores it and
	// then wakes sleepers, so we either see it or are woken.
	if mb = s.cx.mon.Load(); mb != nil {
		if w.cx.idleStart == 0 {
			// The monitor came after this idle period began: report
			// its start now, not a tick later.
			w.idleCycle(mb)
		}
		w.sleepMonitored(mb)
	} else {
		select {
		case <-w.wake:
		case <-s.stop:
		case <-w.quit:
		}
	}
	if stats {
		w.endIdle(s.now())
	}
	if w.sleeping.CompareAndSwap(true, false) {
		s.nsleep.Add(-1)
	}
}

// spinPublish is the spin round after which an idle worker publishes
// its completions (see idle): 64 rounds of runtime.Gosched and a look
// at the queues, tens of µs, past the default spin (64), so that only
// a longer WithSpin publishes before sleeping.
const spinPublish = 64

// look runs one cycle of the idle worker and reports whether it ran a
// task. With statistics, the idle period ends where a look that runs
// something begins: the tasks it runs are busy time, not idle. A look
// that ran only a share of a team task (pop joins teams without
// reporting it) restarts the idle period after it.
func (w *worker) look(stats bool) bool {
	if !stats {
		return w.drv.runOnce(w)
	}
	s := w.s
	t, busy := s.now(), w.busyNs.Load()
	if w.drv.runOnce(w) {
		w.endIdle(t)
		return true
	}
	if w.busyNs.Load() != busy {
		w.endIdle(t)
		w.startIdle(s.now())
	}
	return false
}

// startIdle starts an idle period at now (ns since the epoch), for the
// statistics (Stats).
func (w *worker) startIdle(now int64) { w.idleStart.Store(max(now, 1)) }

// endIdle ends the idle period started by startIdle at end (ns since
// the epoch; at Close's time at the latest) and adds it to the worker's
// idle time; it does nothing outside one. The start is cleared before
// the time is added, so that Stats, reading them the other way round,
// never counts a period twice.
func (w *worker) endIdle(end int64) {
	start := w.idleStart.Load()
	if start == 0 {
		return
	}
	if c := w.s.closedAt.Load(); c != 0 {
		end = min(end, c)
	}
	w.idleStart.Store(0)
	w.idleNs.Add(max(end-start, 0))
}

// pop returns the next task for this worker from the policy, or nil.
// A worker that finds a parallel task forming joins its team first
// (running its share before pop returns).
func (w *worker) pop() *Task {
	s := w.s
	for {
		if w.cx.moveReq.Load() {
			// Safe point: the worker holds no task; apply a context
			// change (also after leaving a team that had not formed).
			w.applyContexts()
		}
		if tm := s.teams.forming.Load(); tm != nil && w.popsFrom(tm.t.Context) && tm.t.CanRunOn(w.info.Kind) {
			if w.joinTeam(tm) && w.once {
				w.ranShare = true
				return nil
			}
			continue
		}
		t := w.popChain(*w.cx.chain.Load())
		if t == nil {
			return nil
		}
		mb := s.cx.mon.Load()
		if mb != nil {
			w.popped(mb, t)
		}
		if err := t.stopErr(); err != nil {
			// Its CancelOn context ended while it was queued.
			w.cancelPopped(t, err, mb)
			continue
		}
		if t.Team <= 1 {
			return t
		}
		s.startTeam(t)
	}
}

// cancelPopped completes t, just popped, with err without running it
// (see CancelOn), as ready completes a task canceled before it is
// queued, and releases its dependents. The monitor (mb, nil for none),
// which saw t pushed and popped, sees it executed in no time.
func (w *worker) cancelPopped(t *Task, err error, mb *monitorBox) {
	s := w.s
	if s.data != nil {
		s.data.unwant(t) // the replicas prefetched for it are not wanted any more
	}
	c := s.contextOf(t)
	var buf [8]*Task
	q := s.finish(t, err, w, buf[:0])
	if mb != nil {
		mb.m.TaskExecuted(c, t, w.info.ID, 0)
	}
	w.release(t)
	for _, n := range q {
		s.ready(n, w)
	}
}

// runOne is one bounded cycle of the worker, Driver.RunOnce's: it runs
// at most one task, or its share of one team task, and queues the
// dependents that task releases instead of running them (execute may run
// a whole chain). It reports whether it ran anything.
func (w *worker) runOne() bool {
	w.once, w.ranShare = true, false
	t := w.pop()
	w.once = false
	if t == nil {
		return w.ranShare
	}
	if next := w.execute1(t); next != nil {
		w.s.ready(next, w)
	}
	return true
}

// execute runs t on this worker: makes its data valid on the worker's
// memory node, calls the CPU implementation (recovering a panic) and
// completes the task, releasing its dependents. When a dependent that
// becomes ready could only have been popped next by this worker anyway
// (see inliner), execute runs it at once, as Taskflow does, skipping
// the push, the pop and the wake-ups.
func (w *worker) execute(t *Task) {
	for t != nil {
		t = w.execute1(t)
	}
}

// execute1 runs t and returns a dependent to run next, or nil.
func (w *worker) execute1(t *Task) *Task {
	mb := w.s.cx.mon.Load()
	var t0 int64
	if mb != nil {
		t0 = w.s.now()
	}
	c := &w.call
	c.Task, c.Worker, c.Rank, c.Size, c.Arg = t, w.info.ID, 0, 1, t.Arg
	var err error
	c.bufs, err = w.prepare(t, c.bufs[:0])
	if err != nil && w.info.Node != RAM && errors.Is(err, ErrDeviceMemory) && w.s.redirectToCPU(t) {
		w.redirected.Add(1)
		c.Task, c.Arg = nil, nil
		return nil
	}
	if err == nil {
		if w.info.Node != RAM && t.stop != nil {
			// Its CancelOn context may have ended while its data were
			// copied in: it has not started, so it does not.
			err = t.stopErr()
		}
		if err == nil {
			err = w.run(t, c)
		}
		if d := w.s.data; d != nil {
			d.releaseTask(t, w.info.Node, err != nil)
			w.releaseScratch(&w.scratch)
		}
	}
	c.Task, c.Arg = nil, nil
	if mb != nil {
		w.complete(t, err, false)
		mb.m.TaskExecuted(w.s.contextOf(t), t, w.info.ID, time.Duration(w.s.now()-t0))
		w.release(t)
		return nil
	}
	next := w.complete(t, err, true)
	w.release(t)
	return next
}

// redirectToCPU hands back to the policy a task whose data cannot fit in
// a device's memory, for the CPU workers of its context only; it reports
// false, leaving the task to fail, when none of them may run it.
func (s *Scheduler) redirectToCPU(t *Task) bool {
	if t.Codelet.CPU == nil {
		return false
	}
	c := s.contextOf(t)
	for _, w := range s.workers {
		if w.info.Kind == CPUWorker && w.popsFrom(c) {
			t.cpuOnly = true
			s.push(t, nil)
			return true
		}
	}
	return false
}

// run calls the implementation, timing it when statistics, traces or a
// performance model need it.
func (w *worker) run(t *Task, c *Call) error {
	s := w.s
	cl := t.Codelet
	if !s.cfg.stats && cl.Model == nil {
		if s.wd == nil {
			return callCPU(t, c)
		}
		w.wdStart(cl, s.now())
		err := callCPU(t, c) // recovers the task's panics: the next line runs
		w.wdStart(nil, 0)
		return err
	}
	if s.wd != nil {
		w.wdStart(cl, s.now())
		defer w.wdStart(nil, 0)
	}
	c.modelTime = 0
	start := time.Now()
	err := callCPU(t, c)
	end := time.Now()
	d := end.Sub(start)
	if err == nil && cl.Model != nil && c.Rank == 0 {
		md := d
		if c.modelTime > 0 {
			md = c.modelTime // computed elsewhere (SetModelTime)
		}
		s.models.record(cl.Model, t, w.info.Kind, float64(md))
	}
	if s.cfg.stats {
		w.busyNs.Add(int64(d))
		ev := traceEvent{
			id: t.id, name: cl.name(), start: start.Sub(s.epoch), end: end.Sub(s.epoch),
			deps: t.preds, rank: c.Rank, size: c.Size,
		}
		if err != nil {
			ev.err = err.Error()
			if te, ok := err.(*TaskError); ok && te.Stack != "" {
				ev.err += "\n" + te.Stack
			}
		}
		w.events = append(w.events, ev)
	}
	return err
}

// callCPU calls t's CPU implementation and turns a returned error or a
// panic into a *TaskError.
func callCPU(t *Task, c *Call) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError(t, c.Worker, r, "")
			if c.Size > 1 {
				te := err.(*TaskError)
				te.Rank, te.Size = c.Rank, c.Size
			}
		}
	}()
	if e := t.Codelet.CPU(c); e != nil {
		return &TaskError{Codelet: t.Codelet.name(), Task: t.id, Tag: t.Tag, Context: t.contextName(), Worker: c.Worker, Rank: c.Rank, Size: c.Size, Err: e}
	}
	return nil
}

func panicError(t *Task, worker int, r any, what string) error {
	return panicErrorOf(t.Codelet, t.id, t.Tag, t.contextName(), worker, r, what)
}

// panicErrorOf is panicError for a task known by its codelet, number,
// tag and context's name (a detached task already completed).
func panicErrorOf(cl *Codelet, id uint64, tag Tag, cx string, worker int, r any, what string) error {
	e, ok := r.(error)
	if !ok {
		e = fmt.Errorf("%s%v", what, r)
	} else if what != "" {
		e = fmt.Errorf("%s%w", what, e)
	}
	stack := string(debug.Stack())
	return &TaskError{Codelet: cl.name(), Task: id, Tag: tag, Context: cx, Worker: worker, Err: e, Panicked: true, Stack: stack, Site: panicSite(stack)}
}

// prepare fills bufs with t's data on this worker's memory node: in
// RAM the registered buffers; with devices, the data layer makes them
// valid on the node and pins them until the task ends (coherence.go).
func (w *worker) prepare(t *Task, bufs []*buffer) ([]*buffer, error) {
	base := len(bufs)
	if d := w.s.data; d != nil {
		var err error
		if bufs, err = d.acquireTask(t, w.info.Node, bufs, w.drain); err != nil {
			return bufs, &TaskError{Codelet: t.Codelet.name(), Task: t.id, Tag: t.Tag, Context: t.contextName(), Worker: w.info.ID, Err: err}
		}
		// A device's admission of t lasts until its Scratch buffers and
		// Redux copies, below, have their room (acquireTask).
		defer d.endAdmission(t, w.info.Node)
	}
	for i, a := range t.Access {
		h := a.Handle
		var b *buffer
		switch a.Mode {
		case ModeScratch:
			var err error
			if b, err = w.scratchBuf(w.scratchSet(), h); err != nil {
				w.unprepare(t)
				return bufs, err
			}
		case ModeRedux:
			var err error
			if b, err = w.reduxBuf(t, h); err != nil {
				w.unprepare(t)
				return bufs, err
			}
		default:
			if w.s.data != nil {
				continue // acquired above
			}
			b = &h.ram
		}
		if w.s.data != nil {
			bufs[base+i] = b
		} else {
			bufs = append(bufs, b)
		}
	}
	return bufs, nil
}

// unprepare releases what prepare acquired when the task does not run.
func (w *worker) unprepare(t *Task) {
	if d := w.s.data; d != nil {
		d.releaseTask(t, w.info.Node, true)
	}
	w.releaseScratch(w.scratchSet())
}

// scratchSet is where the task being prepared keeps its Scratch
// buffers: the worker's, or a GPU worker's slot's (one per task in
// flight).
func (w *worker) scratchSet() *scratchSet {
	if g, ok := w.drv.(*cudaDriver); ok && g.cur != nil {
		return &g.cur.scratch
	}
	return &w.scratch
}

// A scratchSet is a worker's Scratch buffers by handle: a CPU worker's,
// kept for its next tasks; a simulated device worker's, or one task
// slot's of a GPU worker (two tasks in flight never share one), for the
// task that runs there.
type scratchSet map[*Handle]scratchBuf

// A scratchBuf is one Scratch buffer: in RAM (mem nil), or device memory
// of the worker's node (allocScratch).
type scratchBuf struct {
	buf *buffer
	mem accel.Mem
}

// scratchBuf returns the buffer of set for a Scratch access of h,
// allocating it on first use where the worker computes. On a device - a
// simulated one or a GPU alike - that is device memory of h's shape that
// the data layer counts in the node's use and makes room for as it does
// for a replica (allocScratch); it goes back to the node's cache, for
// reuse, when the task ends (releaseScratch).
func (w *worker) scratchBuf(set *scratchSet, h *Handle) (*buffer, error) {
	if sb, ok := (*set)[h]; ok {
		return sb.buf, nil
	}
	var sb scratchBuf
	if d := w.s.data; d != nil && w.info.Node != RAM && h.dev {
		m, err := d.allocScratch(w.info.Node, &h.ram, fmt.Sprintf("a scratch buffer of %v", h), w.drain)
		if err != nil {
			return nil, err
		}
		sb = scratchBuf{buf: d.nodes[w.info.Node].dev.view(m, &h.ram), mem: m}
	} else {
		b, err := h.ram.newLike(h.kind)
		if err != nil {
			return nil, err
		}
		sb.buf = b
	}
	if *set == nil {
		*set = make(scratchSet)
	}
	(*set)[h] = sb
	return sb.buf, nil
}

// releaseScratch gives set's buffers in device memory back to the
// node's cache, once the task that used them has ended (or will not
// run); those in RAM stay for the worker's next tasks.
func (w *worker) releaseScratch(set *scratchSet) {
	if w.info.Node == RAM || len(*set) == 0 {
		return
	}
	for h, sb := range *set {
		if sb.mem != nil {
			w.s.data.freeScratch(w.info.Node, sb.mem, &h.ram)
			delete(*set, h)
		}
	}
}

// reduxBuf returns this worker's private copy of h for the current group
// of Redux accesses, initialized by the init codelet on first use: in
// RAM for a CPU worker, on the device of a device worker (for a GPU the
// init codelet's CPU function runs on a RAM copy that is then copied
// up). The reduction task (Handle.reduceInto) combines the copies and
// frees those on devices.
func (w *worker) reduxBuf(t *Task, h *Handle) (*buffer, error) {
	id := w.info.ID
	rc := h.rcopies[id]
	if rc == nil {
		var err error
		if rc, err = w.newReduxCopy(h); err != nil {
			return nil, err
		}
		h.rcopies[id] = rc
	}
	if !rc.live {
		if err := w.initRedux(t, h, rc); err != nil {
			return nil, fmt.Errorf("initializing a reduction copy of %v: %w", h, err)
		}
		rc.live = true
	}
	return rc.buf, nil
}

// newReduxCopy allocates a private copy of h where w computes; a full
// device is an error wrapping ErrDeviceMemory.
func (w *worker) newReduxCopy(h *Handle) (*reduxCopy, error) {
	if w.info.Node == RAM || w.s.data == nil {
		b, err := h.ram.newLike(h.kind)
		if err != nil {
			return nil, err
		}
		return &reduxCopy{buf: b}, nil
	}
	dev := w.s.data.nodes[w.info.Node].dev
	m, err := w.s.data.allocRedux(w.info.Node, h, w.drain)
	if err != nil {
		return nil, err
	}
	return &reduxCopy{buf: dev.view(m, &h.ram), dev: dev, node: w.info.Node, mem: m}, nil
}

// initRedux runs h's init codelet on rc for task t: in place where the
// host can address it, else on a RAM copy then copied to the device.
func (w *worker) initRedux(t *Task, h *Handle, rc *reduxCopy) error {
	dst := rc.buf
	if rc.dev != nil && rc.dev.host == nil {
		var err error
		if dst, err = h.ram.newLike(h.kind); err != nil {
			return err
		}
	}
	c := Call{Task: t, Worker: w.info.ID, Size: 1, bufs: []*buffer{dst}}
	if err := callCPU(&Task{Codelet: h.rinit, Tag: t.Tag, Context: t.Context}, &c); err != nil {
		return err
	}
	if dst == rc.buf {
		return nil
	}
	done := make(chan error, 1)
	rc.dev.copyIn(rc.mem, dst, func(_ time.Time, err error) { done <- err })
	return <-done
}

// popChain pops from the worker's contexts, innermost first.
func (w *worker) popChain(chain []*Context) *Task {
	for _, c := range chain {
		if t := c.policy.Pop(w.info.ID); t != nil {
			return t
		}
	}
	return nil
}

// popsFrom reports whether the worker pops the tasks of c (nil: global).
func (w *worker) popsFrom(c *Context) bool {
	for _, x := range *w.cx.chain.Load() {
		if x == c || (c == nil && x.parent == nil) {
			return true
		}
	}
	return false
}

// appliedContext returns the innermost context the worker pops from now
// (s.cx.target is where it is going).
func (w *worker) appliedContext() *Context {
	if ch := *w.cx.chain.Load(); len(ch) > 0 {
		return ch[0]
	}
	return w.s.cx.global // retired: it pops from nothing
}
