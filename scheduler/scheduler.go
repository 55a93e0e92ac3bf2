package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/latest"
)

// The engine, followed from SubmitTask to completion, is a pipeline
// whose stages each live in one file and are entered once:
//
//	submit.go   validate, count in flight and in the context
//	deps.go     wire dependencies on earlier accesses, After, tags
//	ready.go    take commute tokens, push to the context's policy, wake
//	worker.go   pop (or join a team, team.go), prepare data, run
//	finish.go   record errors, callback, wake waiters, release successors
//
// Around it: the public API (task.go, handle.go, context.go, options.go,
// errors.go), the workers' drivers (driver.go), the policies as plain
// data structures (policy*.go), context membership and lifecycle
// (context_members.go, context_state.go), the data layer (handle.go,
// registry.go) and tracing (trace.go, gantt.go, context_trace.go).

// A Scheduler runs tasks on a set of workers (one per CPU core by
// default) under a scheduling policy. All methods are safe for
// concurrent use; several goroutines may submit at once.
type Scheduler struct {
	cfg     config
	id      int // this scheduler's number in the process, for messages
	policy  Policy
	workers []*worker
	kinds   [numKinds]int
	epoch   time.Time
	models  *modelStore
	// links holds the workers' links by worker id (WithWorkerLinks);
	// nil when none has one.
	links []WorkerLink

	closed atomic.Bool
	// publishIdle asks workers to publish their completions as soon as
	// they run dry rather than before sleeping: set by a Driver whose
	// tasks are long enough to share (Driver.sample), so that it sees
	// at once that a worker wants tasks.
	publishIdle atomic.Bool
	wd          *watchdog // WithWatchdog; nil: off (read-mostly: off the lines below)

	// inflight is written by every submission and worker batch, and
	// nsleep by workers going to sleep: each on a cache line of its own,
	// off the read-mostly fields above that every worker reads.
	_        [cacheLine]byte
	inflight zeroWaiter // submitted and not completed (batched per worker)
	_        [cacheLine]byte
	nsleep   atomic.Int32
	_        [cacheLine]byte
	// handleMu guards every handle's wiring state (the fields of Handle
	// from cur to rcopies): one lock for all the handles of s, so that a
	// task's accesses are wired under one acquisition rather than one
	// per handle (libgomp's dependences take one lock per team too).
	// Wiring a task of four handles took eight locked instructions for
	// the handles' own locks, a quarter of a Submit. Nothing that holds
	// it blocks, except Unregister while a device's copy of the data
	// comes back to RAM. On a cache line of its own: every submission
	// writes it.
	handleMu sync.Mutex
	_        [cacheLine]byte

	errs       errorLog   // errors of tasks of the global context
	reapMu     sync.Mutex // one reap of tasks no worker is left for at a time (reap)
	deinitMu   sync.Mutex
	deinitErrs []error

	tagMu sync.Mutex
	tags  map[Tag]*tagEntry
	// early are the tasks named in After before their own submission,
	// with how many tasks wait for each (for stuckError); tagMu.
	early map[*Task]int
	// tagsEnded: Close has ended the waits for tags no task carries
	// (endStuckWaits); a later wait for one is ended at once; tagMu.
	tagsEnded bool

	regMu     sync.Mutex
	reduxLive map[*Handle]struct{}

	batchMu sync.Mutex
	batches map[*Batch]struct{} // batches holding tasks (batch.go); made by the first

	nextID atomic.Uint64
	// firstIDs is, by codelet name, the ID of its first task (statistics
	// on), for the Gantt chart's colours (a codelet whose tasks were all
	// canceled draws no bar but keeps its colour); seenCodelets makes
	// that a lookup once per codelet. firstMu guards firstIDs.
	seenCodelets sync.Map // *Codelet -> struct{}
	firstMu      sync.Mutex
	firstIDs     map[string]uint64

	teams teams    // parallel tasks gathering their workers (team.go)
	tasks taskPool // Submit's tasks, reused once completed (submit.go, taskpool.go)

	stopping atomic.Bool
	stop     chan struct{}
	wg       sync.WaitGroup

	cx contexts // scheduling contexts (context_members.go)

	data *dataLayer // memory nodes and coherence; nil without devices (coherence.go)

	closeOnce sync.Once

	pinMu    sync.Mutex
	pins     map[uintptr]pinned // PinHost's, by address
	closeErr error
	// closedAt is when Close stopped waiting for tasks, in ns since the
	// epoch; 0 before. Statistics end there.
	closedAt atomic.Int64
}

// New starts a scheduler: it creates the workers (WithWorkers, PZ_NCPU),
// initializes their drivers on their own goroutines, and installs the
// policy (WithPolicy, PZ_SCHED; default lws). ctx bounds the start-up
// only, the measurement of the devices' links included (a device's bus
// model not saved yet; see Bus): when it ends, New returns its error,
// naming what it was doing. Close the scheduler to stop the workers.
func New(ctx context.Context, opts ...Option) (*Scheduler, error) {
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	newPolicy := cfg.policyImpl
	if newPolicy == nil {
		if newPolicy, err = lookupPolicy(cfg.policy); err != nil {
			return nil, err
		}
	}
	s := &Scheduler{
		cfg:       cfg,
		id:        registry.newSchedulerID(),
		epoch:     time.Now(),
		tags:      make(map[Tag]*tagEntry),
		reduxLive: make(map[*Handle]struct{}),
		stop:      make(chan struct{}),
	}
	s.models = newModelStore(cfg.modelDir)
	if !cfg.stats {
		// A scheduler that records keeps every move for its trace.
		s.cx.resizes = latest.New[Resize](resizeLog)
	}
	if s.policy = newPolicy(s.policyConfig()); s.policy == nil {
		return nil, fmt.Errorf("%w: the WithPolicyFunc function returned a nil Policy", ErrBadOption)
	}
	for i := 0; i < cfg.workers; i++ {
		w := &worker{s: s, info: WorkerInfo{ID: i, Kind: CPUWorker, Node: RAM}, drv: cpuDriver{}, wake: make(chan struct{}, 1),
			driven: i >= cfg.workers-cfg.driven}
		w.call.bufs = w.bufs[:0]
		if l := cfg.links[i]; l != nil {
			if s.links == nil {
				s.links = make([]WorkerLink, cfg.workers)
			}
			s.links[i], w.info.Linked = l, true
		}
		w.serving.Store(!w.driven)
		s.workers = append(s.workers, w)
		s.kinds[CPUWorker]++
	}
	if len(cfg.sims)+len(cfg.devices)+len(cfg.cuda.ordinals) > 0 {
		devs, err := newSimDevices(cfg.sims)
		if err != nil {
			return nil, err
		}
		closeAll := func() {
			for _, o := range devs {
				o.close()
			}
		}
		for i, d := range cfg.devices {
			if d == nil {
				closeAll()
				return nil, fmt.Errorf("%w: WithDevices: device %d of %d is nil; pass opened devices (accel.NewSim, the RuntimeView's)", ErrBadOption, i, len(cfg.devices))
			}
			_, host := d.(accel.HostView)
			_, gpu := d.(*cuda.Accel)
			if !host && !gpu {
				closeAll()
				return nil, fmt.Errorf("%w: device %s (%T): only simulated devices and CUDA GPUs (*cuda.Accel) get workers", ErrBadOption, d.Name(), d)
			}
			dd := newDevice(d)
			dd.borrowed = true
			devs = append(devs, dd)
		}
		gpus, err := openGPUs(ctx, cfg.cuda)
		if err != nil {
			closeAll()
			return nil, err
		}
		devs = append(devs, gpus...)
		s.data = newDataLayer(s, devs)
		saveErr, err := s.data.calibrateBus(ctx, cfg.modelDir, s.models.host)
		if err != nil {
			s.data.close()
			return nil, err
		}
		s.models.busErr = saveErr
		workers := make([]int, 0, len(devs))
		for _, sd := range cfg.sims {
			workers = append(workers, sd.Workers)
		}
		for _, d := range cfg.devices {
			nw := 1
			if _, ok := d.(*cuda.Accel); ok { // a GPU of the RuntimeView's, as one of WithCUDA's
				nw = cfg.cuda.perGPU
			}
			workers = append(workers, nw)
		}
		for range gpus {
			workers = append(workers, cfg.cuda.perGPU)
		}
		for i, nw := range workers {
			var parts []cuda.SMResource
			if a, ok := devs[i].dev.(*cuda.Accel); ok && cfg.cuda.partitions {
				if parts, err = partitionSMs(a, nw); err != nil {
					s.data.close()
					return nil, err
				}
			}
			for j := range nw {
				w := &worker{s: s, info: WorkerInfo{ID: len(s.workers), Kind: SimWorker, Node: MemoryNode(i + 1)}, drv: cpuDriver{}, wake: make(chan struct{}, 1)}
				if a, ok := devs[i].dev.(*cuda.Accel); ok {
					g := &cudaDriver{gpu: a, depth: cfg.cuda.pipeline}
					if parts != nil {
						g.sms = parts[j]
						w.info.SMs = parts[j].Count()
					}
					w.info.Kind, w.drv = CUDAWorker, g
				}
				w.call.bufs = w.bufs[:0]
				w.serving.Store(true)
				s.workers = append(s.workers, w)
				s.kinds[w.info.Kind]++
			}
		}
	}
	if cfg.watchdog > 0 {
		s.wd = newWatchdog(s, cfg.watchdog, cfg.watchdogReport)
		go s.wd.loop() // stopped by stopWorkers
	}
	s.newGlobalContext()
	inits := make(chan error, len(s.workers))
	launched := 0
	for _, w := range s.workers {
		if w.driven {
			continue
		}
		launched++
		s.wg.Add(1)
		go s.runWorker(w, inits)
	}
	var initErrs []error
	for range launched {
		select {
		case err := <-inits:
			if err != nil {
				initErrs = append(initErrs, err)
			}
		case <-ctx.Done():
			initErrs = append(initErrs, fmt.Errorf("scheduler: starting workers: %w", ctxErr(ctx)))
		}
		if ctx.Err() != nil {
			break
		}
	}
	if len(initErrs) > 0 {
		s.stopWorkers()
		if s.data != nil {
			s.data.close()
		}
		return nil, errors.Join(initErrs...)
	}
	infos := make([]WorkerInfo, len(s.workers))
	for i, w := range s.workers {
		infos[i] = w.info
	}
	s.policy.AddWorkers(infos...)
	return s, nil
}

func (s *Scheduler) now() int64 { return int64(time.Since(s.epoch)) }

// Workers returns a description of every worker.
func (s *Scheduler) Workers() []WorkerInfo {
	out := make([]WorkerInfo, len(s.workers))
	for i, w := range s.workers {
		out[i] = w.info
	}
	return out
}

// Policy returns the name of the scheduling policy.
func (s *Scheduler) Policy() string { return s.policy.Name() }

// WaitAll blocks until every task submitted so far (and every task they
// release) has completed, or ctx ends. It returns the errors of the
// tasks that failed since the previous WaitAll, joined, plus one error
// wrapping ErrCanceled that counts the tasks canceled because of them:
// every failure, also one that a Task.Wait or a Synchronous Submit has
// returned already (a failure is never lost for want of a Wait). The
// failures go to the WaitAll that takes them: with several WaitAll
// calls at once, each failure is returned by one of them.
// With a ctx carrying a scheduling context (Within), it waits for that
// context's tasks only (Context.WaitAll), as StarPU's
// starpu_task_wait_for_all does within starpu_sched_ctx_set_context.
// When ctx ends while a context holds tasks and has no workers, the
// error also wraps ErrNoWorkers and names the context; with the watchdog
// on (WithWatchdog), it also names the tasks the workers run (Running),
// which the tasks still pending may be waiting for.
//
// Pending reductions (Redux accesses) are combined into their handles
// first, so the registered data hold the reduced values once WaitAll
// returns. With devices (WithSimDevices), WaitAll then copies every handle whose
// newest version is on a device back to RAM, so the registered slices
// hold the results; the devices' copies stay valid for later tasks. To
// write a handle's data on the host before later tasks, call its Data
// first (which invalidates those copies), or write it in a task: a task
// on a device does not see what the host wrote into the registered
// memory otherwise. When ctx ends during those copies, WaitAll returns
// once the copy in flight has ended (see Handle.Fetch).
func (s *Scheduler) WaitAll(ctx context.Context) error {
	if s.cx.n.Load() > 0 {
		if c := ContextOf(ctx); c != nil && c.s == s && c.parent != nil {
			return c.WaitAll(ctx)
		}
	}
	if err := s.checkNotInTask("WaitAll"); err != nil {
		return err // it would wait for the calling task itself
	}
	s.flushBatches()
	s.flushReductions()
	if err := s.inflight.wait(ctx); err != nil {
		return s.stuckError(fmt.Errorf("scheduler: WaitAll: %w (up to %s pending)", err, tasks(s.Global().Pending())))
	}
	var wb error
	if s.data != nil {
		wb = s.data.writeBack(ctx)
	}
	return errors.Join(s.errs.take(""), s.takeContextErrors(), wb)
}

// Wait blocks until the given tasks have completed or ctx ends, and
// returns their errors joined. Nil entries are ignored, as After ignores
// them, so that Wait(ctx, last) works for a loop that submitted none.
func (s *Scheduler) Wait(ctx context.Context, tasks ...*Task) error {
	var errs []error
	for _, t := range tasks {
		if t == nil {
			continue
		}
		if err := t.Wait(ctx); err != nil {
			if ctx.Err() != nil {
				return err
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Closed reports whether Close has been called: from then on
// submissions, registrations and context changes fail with ErrClosed.
func (s *Scheduler) Closed() bool { return s.closed.Load() }

// Close waits for every submitted task (but for those waiting for a tag
// no task carries, or for a task never submitted, which it cancels with
// ErrNotSubmitted: nothing can be submitted any more), stops the workers, saves the
// calibrated performance models and writes the trace if one was asked
// for. It returns the errors of tasks not yet reported by WaitAll and
// of those steps, among them the performance models and bus model it
// could not save and the invalid model files it did not use (see
// WithPerfModelDir). Further submissions fail with ErrClosed, as do
// registrations, Partition and context changes. The registered data stay
// the program's: Close brings every handle's newest data back to RAM
// from the devices, so Data, Fetch and Unregister still return them
// afterwards, and WaitAll returns nil at once. Close is idempotent:
// later calls return the first call's result.
//
// Called by the code of a task that one of s's workers runs (or a
// task's callback), Close would wait for that task: it fails at once
// with ErrInTask and changes nothing, and is no call for idempotence.
func (s *Scheduler) Close() error {
	if err := s.checkNotInTask("Close"); err != nil {
		return err
	}
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		var errs []error
		// Held tasks start, and reductions still pending are combined,
		// before the workers stop.
		s.flushBatches()
		s.flushReductions()
		// Waits that nothing can end any more (a tag no task carries, a
		// task never submitted) are canceled before the contexts are
		// drained: the drain waits for every task in flight, theirs too.
		s.endStuckWaits()
		s.drainContexts()
		errs = append(errs, s.WaitAll(context.Background()))
		s.closedAt.Store(max(s.now(), 1))
		s.stopWorkers()
		errs = append(errs, s.unpinAll())
		if s.data != nil {
			s.data.close()
		}
		s.releaseSpans()
		s.deinitMu.Lock()
		errs = append(errs, s.deinitErrs...)
		s.deinitMu.Unlock()
		if err := s.models.save(); err != nil {
			errs = append(errs, err)
		}
		if s.cfg.trace != "" {
			if err := s.WriteTraceFiles(s.cfg.trace); err != nil {
				errs = append(errs, err)
			}
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// flushReductions submits the combination of every pending reduction
// (Redux accesses not yet followed by another access).
func (s *Scheduler) flushReductions() {
	s.regMu.Lock()
	if len(s.reduxLive) == 0 {
		s.regMu.Unlock()
		return
	}
	var pend []*Handle
	for h := range s.reduxLive {
		pend = append(pend, h)
	}
	s.regMu.Unlock()
	s.handleMu.Lock()
	for _, h := range pend {
		h.flushReduxLocked()
	}
	s.handleMu.Unlock()
}

// recordDeinit keeps a worker's deinit error for Close.
func (s *Scheduler) recordDeinit(err error) {
	s.deinitMu.Lock()
	s.deinitErrs = append(s.deinitErrs, err)
	s.deinitMu.Unlock()
}

func (s *Scheduler) stopWorkers() {
	s.stopping.Store(true)
	close(s.stop)
	s.wg.Wait()
	if s.wd != nil {
		s.wd.close()
	}
}
