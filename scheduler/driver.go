package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// A driver runs one worker's cycles, after StarPU's driver interface:
// init once on the goroutine that will drive the worker (a CUDA driver
// locks the OS thread and makes its context current there), then
// runOnce until the scheduler stops, then deinit. runOnce does one step
// of work - take a task and run it - and reports whether it found any.
// The CPU worker is the first driver; the GPU worker will be the second.
type driver interface {
	init(w *worker) error
	runOnce(w *worker) bool
	deinit(w *worker) error
}

// cpuDriver runs codelets' CPU implementations on the driving goroutine.
type cpuDriver struct{}

func (cpuDriver) init(*worker) error { return nil }

func (cpuDriver) deinit(*worker) error { return nil }

func (cpuDriver) runOnce(w *worker) bool {
	t := w.pop()
	if t == nil {
		return false
	}
	w.execute(t)
	return true
}

var _ driver = cpuDriver{}

// runWorker drives a worker the scheduler launched, on its own goroutine.
func (s *Scheduler) runWorker(w *worker, inits chan<- error) {
	defer s.wg.Done()
	w.g.Store(goid())
	w.root.Store(stackRoot())
	if err := w.drv.init(w); err != nil {
		inits <- fmt.Errorf("scheduler: initializing worker %d (%v): %w", w.info.ID, w.info.Kind, err)
		return
	}
	inits <- nil
	w.loop()
	if err := w.drv.deinit(w); err != nil {
		s.recordDeinit(fmt.Errorf("scheduler: deinitializing worker %d (%v): %w", w.info.ID, w.info.Kind, err))
	}
}

// loop runs the worker's cycles until the scheduler stops (or w.quit
// is closed), sleeping when it finds no work. It reports whether w.quit
// ended it (the scheduler was not stopping then).
func (w *worker) loop() (quit bool) {
	s := w.s
	for !s.stopping.Load() {
		if w.drv.runOnce(w) {
			continue
		}
		select {
		case <-w.quit:
			w.flushDone()
			return true
		default:
		}
		w.idle()
	}
	w.flushDone()
	return false
}

// ErrDriver is returned by Scheduler.Driver for a worker the application
// cannot drive (one the scheduler runs, or one already being driven),
// and by Driver methods called out of order.
var ErrDriver = errors.New("scheduler: invalid driver use")

// A Driver runs the cycles of one worker on its caller's goroutine
// instead of one the scheduler starts - StarPU's not-launched drivers -
// for code that must stay on one OS thread, such as a graphics or CUDA
// context bound to the program's main thread. Create the scheduler with
// WithDrivenWorkers, take each driven worker's Driver, lock the calling
// goroutine to its thread (runtime.LockOSThread) if the tasks need it,
// and either call Run, which returns at Close, or call Init, RunOnce as
// often as the program's own loop allows, and Deinit. A goroutine that
// submits the tasks can be the driver itself: Submit runs tasks on the
// worker once enough are in flight, and WaitAll runs them while waiting.
//
// The policy gives tasks to a driven worker like to any other, so a
// driven worker must be driven until Close for every task to run. A
// driver runs once: when it ends before Close (Deinit, or Run's ctx
// ending), the worker leaves the scheduler, its queued tasks going to
// the other workers (see Deinit). WaitAll with a deadline names a
// driven worker that nothing drives; Close waits for its driver while
// tasks complete, and once none has for a second goes on without a
// worker whose driver was never initialized, handing its tasks to the
// others or, when none can run them, canceling them with an error that
// names the worker (its Init then fails with ErrClosed, and Run returns
// nil).
//
// Init, Run, RunOnce, Deinit and WaitAll take the Driver for the whole
// call, whatever goroutines make them: one runs the worker at a time.
// While one of them is in the Driver, another call - from a second
// goroutine, or from the code of a task the driver runs - does not run
// the worker as well: RunOnce returns false, Submit and SubmitTask queue
// their task as Scheduler.Submit does, and Init, Run, Deinit and WaitAll
// fail with ErrDriver saying the Driver is in use (from another
// goroutine, Scheduler.WaitAll waits without driving).
//
// Submit and SubmitTask do not take the Driver: they are the per-task
// path, where the two locked instructions of taking and releasing it
// would cost a third of a task Submit runs at once. They only look: they
// queue while one of the calls above holds it, or while the code of a
// task they run calls them, and otherwise they may run the worker
// themselves. So the program must not call the Driver from another
// goroutine while a Submit or SubmitTask is in it, nor Submit or
// SubmitTask from another goroutine except while one of the calls above
// holds the Driver (Run, on the driving goroutine, for instance): two
// Submits at once, or a RunOnce, Deinit or WaitAll started during a
// Submit on another goroutine, are the program's error, which the race
// detector reports; a call the Driver sees in time is refused as above.
// The goroutine in the Driver runs the tasks, so a program whose tasks
// need one OS thread calls the Driver from the goroutine locked to it
// only, and submits from the others with Scheduler.Submit.
type Driver struct {
	w *worker
	// limit is the count of tasks in flight above which Submit runs
	// tasks (SetSubmitLimit); 0 never.
	limit atomic.Int64
	// busy is held (CompareAndSwap from false) by Init, Run, RunOnce,
	// Deinit and WaitAll for the whole call (take).
	busy atomic.Bool
	// inSubmit is set by Submit and SubmitTask while they may run the
	// worker (they do not take busy: see Driver). A plain field: it is
	// read by the goroutine in Submit, by the code of the tasks Submit
	// runs (which queue, seeing it), and by a call that took busy
	// (take), which refuses; another goroutine's access while it is set
	// is the program's error, which the race detector reports here.
	inSubmit bool
	// The fields below are those of the call in the Driver (busy or
	// inSubmit) only.
	running bool // Submit runs ready tasks (see full)
	// runs counts the tasks Submit ran at once; every sampleEvery-th is
	// timed, and runNs is the moving average of those times (sample).
	runs  uint32
	runNs float64
	task  Task // the scratch task of direct
}

// A driven worker's driver state (worker.dstate).
const (
	driverNew  int32 = iota
	driverInit       // Init called: the worker is driven
	driverDone       // Deinit called (or Run ended): the worker left
	// driverDropped: never initialized, and Close went on without it
	// (retireUndriven); Init fails.
	driverDropped
)

// Driver returns the driver of worker id, one of the workers
// WithDrivenWorkers left to the application (the last CPU workers). It fails
// with ErrDriver for a worker the scheduler runs itself, or one whose
// Driver was already taken.
func (s *Scheduler) Driver(id int) (*Driver, error) {
	if id < 0 || id >= len(s.workers) {
		return nil, fmt.Errorf("%w: worker %d does not exist (ids are 0..%d)", ErrBadWorker, id, len(s.workers)-1)
	}
	w := s.workers[id]
	if !w.driven {
		return nil, fmt.Errorf("%w: worker %d is run by the scheduler; WithDrivenWorkers(n) leaves the last n CPU workers to the application", ErrDriver, id)
	}
	if !w.taken.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("%w: the driver of worker %d was already taken", ErrDriver, id)
	}
	d := &Driver{w: w}
	d.limit.Store(int64(8 * len(s.workers)))
	// The scratch task of direct is submitted for good: it is only seen
	// while it runs (see direct).
	d.task.state.Store(stateSubmitted)
	return d, nil
}

// take takes the Driver (busy) for Init, Run, RunOnce, Deinit or
// WaitAll. It fails while another of those holds it, or while a Submit
// or SubmitTask may run the worker: from the code of a task they run
// (the running task's call state is the worker's), or, the program's
// error, from another goroutine (see Driver). Release with d.busy.Store(false).
func (d *Driver) take() bool {
	if !d.busy.CompareAndSwap(false, true) {
		return false
	}
	if d.inSubmit {
		d.busy.Store(false)
		return false
	}
	return true
}

// inUse is the error of op called while another call holds the Driver
// (see Driver).
func (d *Driver) inUse(op string) error {
	return fmt.Errorf("%w: %s of worker %d while its Driver is in use, by another goroutine or by the task it runs whose code made this call: a Driver runs one call at a time", ErrDriver, op, d.w.info.ID)
}

// Worker returns the id of the driven worker.
func (d *Driver) Worker() int { return d.w.info.ID }

// Init initializes the worker on the calling goroutine. Call it once,
// before RunOnce, on the goroutine that will drive the worker.
func (d *Driver) Init() error {
	if !d.take() {
		return d.inUse("Init")
	}
	defer d.busy.Store(false)
	return d.init()
}

// init is Init, by the caller that holds d.busy.
func (d *Driver) init() error {
	if !d.w.dstate.CompareAndSwap(driverNew, driverInit) {
		if d.w.dstate.Load() == driverDropped {
			return fmt.Errorf("%w: Init of worker %d: Close found tasks waiting for it and went on without it, as nothing had driven it: %w", ErrDriver, d.w.info.ID, ErrClosed)
		}
		if d.w.dstate.Load() == driverDone {
			// Run deinitializes at its end too: a second Run lands here.
			return fmt.Errorf("%w: Init of worker %d after its Deinit (or the end of Run): a driver runs once, and the worker left the scheduler then", ErrDriver, d.w.info.ID)
		}
		return fmt.Errorf("%w: Init of worker %d called twice", ErrDriver, d.w.info.ID)
	}
	if err := d.w.drv.init(d.w); err != nil {
		return fmt.Errorf("scheduler: initializing worker %d (%v): %w", d.w.info.ID, d.w.info.Kind, err)
	}
	return nil
}

// RunOnce does one cycle of the worker, as StarPU's run_once: it runs
// at most one task, the next the policy gives this worker, or this
// worker's share of one team task (WithTeam) forming in its contexts.
// The tasks that one releases are queued for the policy, not run here,
// so a frame loop that calls RunOnce spends at most one task's time in
// it. RunOnce does not wait for tasks: without one for this worker it
// returns false at once. It waits only for the other members of a team
// it joins, as every member does. It reports whether it ran anything;
// false also before Init, after Deinit, once the scheduler is closed,
// from the code of a task the driver runs, and while another goroutine
// is in a call of the Driver (see Driver).
func (d *Driver) RunOnce() bool {
	w := d.w
	if !d.take() {
		return false
	}
	if d.w.dstate.Load() != driverInit || w.s.stopping.Load() {
		w.flushDone()
		d.busy.Store(false)
		return false
	}
	// A program that calls RunOnce drives the worker from a loop of its
	// own: it serves until Deinit.
	w.serving.Store(true)
	ran := w.runOne()
	// Publish the completions at once (the scheduler's own workers do it
	// in batches, and when they go idle): the application may not call
	// RunOnce again before it waits for them.
	w.flushDone()
	d.busy.Store(false)
	return ran
}

// Deinit releases the worker's resources after its last RunOnce. A
// driver runs once: unless the scheduler is closing, the worker then
// leaves the scheduler, as a StarPU worker whose not-launched driver
// deinitializes leaves its worker set: it leaves its contexts and their
// policies, the tasks queued for it go to the other workers, and no task
// is given to it any more. A team (WithTeam) larger than the CPU workers
// left is refused by Submit from then on, and a task submitted when no
// worker is left at all (every worker driven, every driver ended) too
// (ErrDriver); those already queued for no one are canceled when the
// last driver ends, with an error naming the worker, so that WaitAll
// returns them. Deinit while the Driver is in use (see Driver), such as
// from the code of a task it runs, fails with ErrDriver.
func (d *Driver) Deinit() error {
	if !d.take() {
		return d.inUse("Deinit")
	}
	defer d.busy.Store(false)
	return d.deinit()
}

// deinit is Deinit, by the caller that holds d.busy.
func (d *Driver) deinit() error {
	if !d.w.dstate.CompareAndSwap(driverInit, driverDone) {
		return fmt.Errorf("%w: Deinit of worker %d without Init, or twice", ErrDriver, d.w.info.ID)
	}
	d.w.flushDone()
	d.w.serving.Store(false)
	d.w.s.retire(d.w)
	if err := d.w.drv.deinit(d.w); err != nil {
		return fmt.Errorf("scheduler: deinitializing worker %d (%v): %w", d.w.info.ID, d.w.info.Kind, err)
	}
	return nil
}

// Run drives the worker until the scheduler is closed or ctx ends: Init,
// cycles (sleeping, like the scheduler's own workers, while there is no
// task for it), Deinit. It returns nil at Close, ctx's error when ctx
// ended first: the worker then leaves the scheduler (see Deinit), and a
// second Run fails (ErrDriver). Call it from the goroutine (locked to
// the OS thread if need be) that must run the worker's tasks.
func (d *Driver) Run(ctx context.Context) error {
	if !d.take() {
		return d.inUse("Run")
	}
	defer d.busy.Store(false)
	if err := d.init(); err != nil {
		if errors.Is(err, ErrClosed) {
			return nil // Close went on without this worker (see Init)
		}
		return err
	}
	d.w.quit = ctx.Done()
	d.w.serving.Store(true)
	// Whether ctx ended the loop is decided here, before Deinit: Close
	// may end while the worker leaves, and Run then still returns ctx's
	// error, not the nil of a worker driven until Close.
	left := d.w.loop()
	d.w.quit = nil
	err := d.deinit()
	if left {
		return errors.Join(fmt.Errorf("scheduler: driving worker %d: %w", d.w.info.ID, ctx.Err()), err)
	}
	return err
}

// Submit submits a task of cl like Scheduler.Submit, and makes the
// submitting goroutine one of the workers, as an OpenMP thread that
// creates tasks is one of its team: while more tasks are in flight
// than the submit limit (SetSubmitLimit; 8 per worker of the scheduler
// by default), a task that is ready at once runs on the driven worker
// before Submit returns, instead of being queued (libgomp's rule past
// 64 queued tasks per thread), and when it is not ready Submit runs the
// policy's next task for the worker, if any. Under the limit a task is
// queued as by Scheduler.Submit. A goroutine that submits a large graph
// thus works on it instead of letting the queues grow, and a program
// needs no more goroutines than cores. A task with a priority, a team,
// a Commute access or a detached completion is always queued (the
// policy orders it), as is every task while the scheduler has
// scheduling contexts or a monitor. Submit never waits for a task that
// is not ready.
//
// Submit times one task in 64 that it runs; when they take more than a
// few µs, the other workers publish their completions as soon as they
// run out of tasks, so that Submit queues for them again at once.
//
// Such a task with no data, no dependencies and no tag, while nothing
// records tasks (performance models, statistics, trace, scheduling
// contexts, a monitor, the watchdog), runs as a plain call (see
// direct), about 25 ns where a queued task costs hundreds. A task's
// code may thus run on the submitting goroutine, inside Submit: it must
// not wait for anything that goroutine holds (a lock taken around the
// Submit call). It may call Submit itself: the new task is then queued,
// never run inside the running one. A Synchronous task is waited for
// while the worker runs tasks, as it may be queued for this very
// worker.
//
// Call it between Init and Deinit (ErrDriver otherwise), from the
// goroutine that drives the worker, and wait with the Driver's WaitAll,
// which runs the tasks queued for this worker: Scheduler.WaitAll
// waits, but runs nothing on the driven worker. Submit does not take
// the Driver (see Driver): while Init, Run, RunOnce, Deinit or WaitAll
// holds it - from the code of a task it runs, or from another goroutine
// - Submit only queues the task, and so it does from the code of a task
// it runs itself. Otherwise no other goroutine may call the Driver until
// it returns (the race detector reports it). Called from another
// goroutine while the driving one leaves the Driver alone, it may run
// the task at once, on the calling goroutine: not on the OS thread the
// driving goroutine may be locked to.
func (d *Driver) Submit(ctx context.Context, cl *Codelet, args ...Arg) error {
	if !poolable(args) {
		return d.SubmitTask(ctx, NewTask(cl, args...))
	}
	// An atomic load (a plain one on amd64 and arm64): no locked
	// instruction per task (see Driver).
	if d.busy.Load() || d.inSubmit {
		// From the code of a task this driver runs, or from another
		// goroutine while a call holds the Driver: queue it, as from
		// any task's code (running it here would reuse the worker's
		// call state under the running task).
		if err := d.submitting("Submit"); err != nil {
			return err
		}
		return d.w.s.submit(ctx, cl, args, nil)
	}
	if err := d.submitting("Submit"); err != nil {
		return err
	}
	d.inSubmit = true
	run := d.full()
	t0 := d.startRun(run)
	if run != nil && d.direct(ctx, cl, args) {
		d.endRun(t0)
		d.inSubmit = false
		return nil
	}
	err := d.w.s.submit(ctx, cl, args, run)
	d.endRun(t0)
	d.publish(run)
	d.inSubmit = false
	return err
}

// startRun counts a submission that may run its task at once (run not
// nil) and returns the time to sample it from, zero when it is not one
// of the sampled (see sample).
func (d *Driver) startRun(run *worker) time.Time {
	if run == nil {
		return time.Time{}
	}
	d.runs++
	if d.runs%sampleEvery != 1 {
		return time.Time{}
	}
	return time.Now()
}

// endRun samples the submission started at t0, if it is sampled.
func (d *Driver) endRun(t0 time.Time) {
	if !t0.IsZero() {
		d.sample(time.Since(t0))
	}
}

// sampleEvery is how often Submit times a task it runs at once: one in
// 64 (two clock reads, about 50 ns, over 64 tasks).
const sampleEvery = 64

// shareNs is the time a task must take for Submit to hand tasks to idle
// workers as soon as they run dry: a few times what queueing one costs
// its submitter and the worker that takes it (hundreds of ns, more with
// a wake-up). Shorter tasks cost less run here than shared.
const shareNs = 2000

// sample adds the time of a task Submit ran at once (with the
// submission's own cost) to the moving average, and tells the workers
// whether to publish their completions as soon as they run dry: when
// tasks are long enough to share (shareNs), a worker without tasks is
// then seen at once (full), instead of when it goes to sleep.
func (d *Driver) sample(dt time.Duration) {
	if d.runNs == 0 {
		d.runNs = float64(dt)
	} else {
		d.runNs += (float64(dt) - d.runNs) / 4
	}
	share := d.runNs > shareNs
	if p := &d.w.s.publishIdle; p.Load() != share {
		p.Store(share)
	}
}

// direct runs a task of cl at once on the driven worker, as a plain
// call, when nothing can tell it from a task queued and run: Submit's
// task is never seen by the caller, and with no data, no dependencies,
// no tag and nothing that records it (performance model, statistics,
// trace, contexts, monitor, watchdog), it completes before Submit
// returns with none of the bookkeeping another goroutine could observe -
// the in-flight count, the task's states and successors, the pool. Like
// libgomp's task run at creation, it is then a call, with the task a
// scratch one of the driver. It reports false, having done nothing, for
// any other task.
func (d *Driver) direct(ctx context.Context, cl *Codelet, args []Arg) bool {
	w := d.w
	s := w.s
	if cl == nil || cl.CPU == nil || cl.Detached != nil || cl.Model != nil || s.cfg.stats || s.wd != nil ||
		s.cx.n.Load() > 0 || s.cx.mon.Load() != nil || s.closed.Load() || s.stopping.Load() || w.cx.moveReq.Load() {
		return false
	}
	var arg any
	for i := range args {
		if args[i].kind != argValue {
			return false
		}
		arg = args[i].v
	}
	select {
	case <-ctx.Done():
		return false // Scheduler.Submit's path reports it
	default:
	}
	// The scratch task stays in stateSubmitted (set once, by
	// Scheduler.Driver): only the task's own code sees it, through its
	// Call, which is valid during the call only, and the task is not
	// done while it runs (Err is nil, Done not closed). Nothing reads
	// it after the call: its completion has no waiter, successor, tag
	// or pool to tell. So the task's states cost no store (on amd64 an
	// atomic store is a locked XCHG).
	t := &d.task
	t.Codelet, t.Arg, t.s, t.Context = cl, arg, s, s.cx.global
	c := &w.call
	c.Task, c.Worker, c.Rank, c.Size, c.Arg, c.bufs = t, w.info.ID, 0, 1, arg, c.bufs[:0]
	err := callCPU(t, c)
	c.Task, c.Arg = nil, nil
	// Stats read nTasks from any goroutine, and promise exact counts
	// once WaitAll has returned: Scheduler.WaitAll too, which a task
	// run here does not hold (it is not in flight), so the count is
	// published at once, not in the workers' batches.
	w.doneTasks++
	w.nTasks.Store(w.doneTasks)
	if err != nil {
		s.recordTask(t, err)
	} else if cl.Flops != nil {
		w.flops.Add(cl.Flops(t))
	}
	t.Codelet, t.Arg = nil, nil
	return true
}

// SubmitTask submits t like Scheduler.SubmitTask, from the driven
// worker, running it at once when it is ready and more than the submit
// limit of tasks are in flight (see Submit). Like Submit, it does not
// take the Driver (see Driver): it queues t while another call holds
// it, and no other goroutine may call the Driver until it returns.
func (d *Driver) SubmitTask(ctx context.Context, t *Task) error {
	if d.busy.Load() || d.inSubmit {
		if err := d.submitting("SubmitTask"); err != nil {
			return err
		}
		if t == nil {
			return errNilTask
		}
		return d.w.s.submitTask(ctx, t, nil) // see Submit
	}
	if err := d.submitting("SubmitTask"); err != nil {
		return err
	}
	if t == nil {
		return errNilTask
	}
	d.inSubmit = true
	defer d.endSubmit()
	// A synchronous task is waited for here, driving the worker: it may
	// be queued for this very worker.
	sync := t.sync
	t.sync = false
	run := d.full()
	t0 := d.startRun(run)
	err := d.w.s.submitTask(ctx, t, run)
	d.endRun(t0)
	d.publish(run)
	if err != nil || !sync {
		return err
	}
	if t.heldDep.Load() {
		// t waits, through its data, After or a tag, for a task a Batch
		// holds (or held): waiting starts it, as Task.Wait does.
		d.w.s.flushBatches()
	}
	if err := d.driveUntil(ctx, t.Done()); err != nil {
		return fmt.Errorf("scheduler: waiting for task %q on worker %d's driver: %w (%w)", t.Codelet.name(), d.w.info.ID, err, ErrTaskPending)
	}
	return t.Err()
}

// endSubmit ends SubmitTask's hold of the Driver.
func (d *Driver) endSubmit() { d.inSubmit = false }

// driveUntil runs the worker's cycles until ch is closed, sleeping like
// the scheduler's own workers while there is no task for it. It returns
// ctx's error if ctx ends first, nil once ch is closed: also when the
// workers stop (Close) first, it returns nil only once ch is closed,
// waiting without driving, so that a Synchronous SubmitTask never takes
// a task still pending for completed. (Close stops the workers once no
// task is in flight, so a task's Done is closed by then.) The caller
// holds the Driver (d.busy, or d.inSubmit).
func (d *Driver) driveUntil(ctx context.Context, ch <-chan struct{}) error {
	w := d.w
	s := w.s
	// One channel for the worker's sleep to watch: closed by ch or ctx.
	quit, stop := make(chan struct{}), make(chan struct{})
	go func() {
		select {
		case <-ch:
		case <-ctx.Done():
		case <-stop:
		}
		close(quit)
	}()
	w.quit = quit
	serving := w.serving.Load()
	w.serving.Store(true)
	for !isClosed(quit) && !s.stopping.Load() {
		if !w.drv.runOnce(w) {
			w.idle()
		}
	}
	w.serving.Store(serving)
	w.quit = nil
	close(stop)
	w.flushDone()
	select {
	case <-ch:
		return nil
	default:
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctxErr(ctx)
	}
}

// SetSubmitLimit sets the count of tasks in flight (submitted to the
// scheduler and not completed) above which Submit and SubmitTask run
// tasks on the driven worker (see Submit); they keep doing so until the
// count is down to half the limit. n ≤ 0 turns that off: they only
// queue. The default, 8 per worker of the scheduler, keeps every other
// worker supplied while the submitter works; a larger limit gives the
// policy more ready tasks to choose from (priorities, dmda's
// placement).
func (d *Driver) SetSubmitLimit(n int) { d.limit.Store(int64(max(n, 0))) }

// submitting checks that the driver may submit now.
func (d *Driver) submitting(op string) error {
	if d.w.dstate.Load() != driverInit {
		return fmt.Errorf("%w: %s from worker %d's driver outside Init..Deinit", ErrDriver, op, d.w.info.ID)
	}
	return nil
}

// full returns the driven worker when Submit should run a ready task
// at once, nil otherwise: from when more tasks than the submit limit are
// in flight until they are down to half of it. The hysteresis lets the
// other workers drain the queues without a push contending with them at
// every task.
func (d *Driver) full() *worker {
	limit := d.limit.Load()
	if limit <= 0 {
		return nil
	}
	n := d.w.s.inflight.n.Load()
	was := d.running
	if d.running {
		d.running = n > limit/2
	} else {
		d.running = n > limit
	}
	if d.running != was {
		d.w.serving.Store(d.running)
	}
	if !d.running {
		return nil
	}
	return d.w
}

// publish publishes the completions of tasks the driver ran (or
// canceled) while submitting - the program may wait for them with
// Scheduler.WaitAll, from another goroutine, without driving again -
// after running one queued task for the worker when too many tasks
// were in flight (full) and the one submitted did not run at once.
func (d *Driver) publish(full *worker) {
	w := d.w
	if full != nil && w.doneBatch == 0 && !w.s.stopping.Load() {
		w.drv.runOnce(w)
	}
	if w.doneBatch > 0 {
		w.flushDone()
	}
}

// WaitAll waits, like Scheduler.WaitAll, until every task submitted to
// the scheduler has completed, running on the driven worker the tasks
// the policy gives it meanwhile (and sleeping, like the scheduler's own
// workers, while there are none), as an OpenMP thread does at a
// taskwait. It returns what Scheduler.WaitAll returns: the errors of
// the tasks that failed since the previous WaitAll. It waits for the
// whole scheduler's tasks, whatever scheduling context ctx carries.
// From the code of a task the driver runs (which it would wait for),
// or from another goroutine while a call is in the Driver (see Driver),
// it fails with ErrDriver.
func (d *Driver) WaitAll(ctx context.Context) error {
	if !d.take() {
		if err := d.submitting("WaitAll"); err != nil {
			return err
		}
		return d.inUse("WaitAll")
	}
	defer d.busy.Store(false)
	if err := d.submitting("WaitAll"); err != nil {
		return err
	}
	w := d.w
	s := w.s
	s.flushBatches()
	s.flushReductions()
	for !s.stopping.Load() {
		w.flushDone()
		zero := s.inflight.zero()
		if zero == nil {
			break
		}
		err := d.driveUntil(ctx, zero)
		s.inflight.unwait()
		if err != nil {
			return s.stuckError(fmt.Errorf("scheduler: WaitAll on worker %d's driver: %w (up to %s pending)", w.info.ID, err, tasks(s.Global().Pending())))
		}
	}
	return s.WaitAll(ctx)
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
