package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

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

	closed atomic.Bool

	// inflight is written by every submission and worker batch, and
	// nsleep by workers going to sleep: each on a cache line of its own,
	// off the read-mostly fields above that every worker reads.
	_        [cacheLine]byte
	inflight zeroWaiter // submitted and not completed (batched per worker)
	_        [cacheLine]byte
	nsleep   atomic.Int32
	_        [cacheLine]byte

	errs       errorLog // errors of tasks of the global context
	deinitMu   sync.Mutex
	deinitErrs []error

	tagMu sync.Mutex
	tags  map[Tag]*tagEntry

	regMu     sync.Mutex
	reduxLive map[*Handle]struct{}

	nextID atomic.Uint64

	teams teams // parallel tasks gathering their workers (team.go)

	stopping atomic.Bool
	stop     chan struct{}
	wg       sync.WaitGroup

	cx contexts // scheduling contexts (context.go)

	closeOnce sync.Once
	closeErr  error
	closedAt  time.Time
}

// New starts a scheduler: it creates the workers (WithWorkers, PZ_NCPU),
// initializes their drivers on their own goroutines, and installs the
// policy (WithPolicy, PZ_SCHED; default lws). ctx bounds the start-up
// only. Close the scheduler to stop the workers.
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
	s.policy = newPolicy(s.policyConfig())
	for i := 0; i < cfg.workers; i++ {
		w := &worker{s: s, info: WorkerInfo{ID: i, Kind: CPUWorker, Node: RAM}, drv: cpuDriver{}, wake: make(chan struct{}, 1),
			driven: i >= cfg.workers-cfg.driven}
		w.call.bufs = w.bufs[:0]
		s.workers = append(s.workers, w)
		s.kinds[CPUWorker]++
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
			initErrs = append(initErrs, fmt.Errorf("scheduler: starting workers: %w", ctx.Err()))
		}
		if ctx.Err() != nil {
			break
		}
	}
	if len(initErrs) > 0 {
		s.stopWorkers()
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

// Submit creates a task of cl with the given accesses and options and
// submits it (see SubmitTask). It does not wait for the task unless
// Synchronous is among args.
func (s *Scheduler) Submit(ctx context.Context, cl *Codelet, args ...Arg) error {
	t := &Task{Codelet: cl}
	t.apply(args)
	return s.SubmitTask(ctx, t)
}

// SubmitTask submits t: it becomes ready when its dependencies - implicit
// ones from the previous accesses to its handles, After tasks, AfterTags
// - have completed, and then the policy gives it to a worker. It returns
// an error, and the task is not submitted, for invalid input (see the
// package's errors); an error of the task itself is reported by Wait,
// Task.Err and WaitAll. Submission does not block (unless t is
// synchronous, see Synchronous) and costs well under a microsecond.
func (s *Scheduler) SubmitTask(ctx context.Context, t *Task) error {
	// A non-blocking receive on Done is cheaper than ctx.Err, which
	// locks a cancelable context's mutex (shared by all submitters).
	select {
	case <-ctx.Done():
		return fmt.Errorf("scheduler: submitting %q: %w", t.Codelet.name(), ctx.Err())
	default:
	}
	if !t.state.CompareAndSwap(stateNew, stateSubmitted) {
		return fmt.Errorf("%w: %q", ErrAlreadySubmitted, t.Codelet.name())
	}
	if err := s.validate(t); err != nil {
		t.state.Store(stateNew)
		return err
	}
	// Counting the task before checking closed makes Close wait for it
	// (Close sets closed, then waits for inflight to reach 0).
	s.inflight.add(1)
	if s.closed.Load() {
		s.inflight.add(-1)
		t.state.Store(stateNew)
		return fmt.Errorf("submitting %q: %w", t.Codelet.name(), ErrClosed)
	}
	if t.Context != nil || s.cx.n.Load() > 0 {
		if err := s.enterContext(ctx, t); err != nil {
			s.inflight.add(-1)
			t.state.Store(stateNew)
			return err
		}
	}
	t.s = s
	t.pending.Store(1)
	if s.cfg.stats {
		t.id = s.nextID.Add(1)
	}
	if t.Codelet.Model != nil {
		t.footprint = footprint(t.Access)
		t.hasFoot = true
	}
	s.wire(t)
	if t.pending.Add(-1) == 0 {
		s.ready(t, nil)
	}
	if t.sync {
		return t.Wait(ctx)
	}
	return nil
}

// validate checks t before anything is changed.
func (s *Scheduler) validate(t *Task) error {
	cl := t.Codelet
	if cl == nil {
		return fmt.Errorf("%w: task without a codelet", ErrNoImplementation)
	}
	if cl.CPU == nil || s.kinds[CPUWorker] == 0 {
		return fmt.Errorf("%w: codelet %q has no implementation for the workers here (%d cpu); give it a CPU function", ErrNoImplementation, cl.name(), s.kinds[CPUWorker])
	}
	if t.Team < 0 || t.Team > len(s.workers) {
		return fmt.Errorf("%w: task %q asks for a team of %d workers, the scheduler has %d", ErrBadTeam, cl.name(), t.Team, len(s.workers))
	}
	for i, a := range t.Access {
		h := a.Handle
		if h == nil {
			return fmt.Errorf("%w: task %q access %d has a nil handle", ErrBadData, cl.name(), i)
		}
		if h.s != s {
			return fmt.Errorf("%w: task %q access %d uses %v", ErrForeignHandle, cl.name(), i, h)
		}
		if !a.Mode.valid() {
			return fmt.Errorf("%w: task %q access %d on %v has mode %v; use R, W, RW, Scratch, Redux or Commute", ErrInvalidMode, cl.name(), i, h, a.Mode)
		}
		switch h.status.Load() {
		case handlePartitioned:
			return fmt.Errorf("task %q access %d: %w: %v is partitioned into tiles; access the tiles, or Unpartition it first", cl.name(), i, ErrPartitioned, h)
		case handleUnregistered:
			return fmt.Errorf("task %q access %d: %w: %v is no longer registered (unregistered, or a tile of an unpartitioned handle)", cl.name(), i, ErrUnregistered, h)
		}
		if a.Mode == ModeRedux {
			h.mu.Lock()
			ok := h.rcombine != nil
			h.mu.Unlock()
			if !ok {
				return fmt.Errorf("%w: task %q uses Redux on %v, which has no reduction; call SetReduction first", ErrInvalidMode, cl.name(), h)
			}
		}
		if (a.Mode == ModeRedux || a.Mode == ModeScratch) && h.kind == kindValue {
			if _, err := h.ram.newLike(kindValue); err != nil {
				return fmt.Errorf("task %q access %d: %w", cl.name(), i, err)
			}
		}
		if a.Mode&ModeCommute != 0 {
			t.commute = true
		}
		for j := 0; j < i; j++ {
			if b := t.Access[j]; b.Handle == h && b.Mode != a.Mode &&
				((a.Mode|b.Mode)&(ModeScratch|ModeRedux|ModeCommute) != 0) {
				return fmt.Errorf("%w: task %q accesses %v as both %v and %v", ErrInvalidMode, cl.name(), h, b.Mode, a.Mode)
			}
		}
	}
	return nil
}

// wire adds t's dependencies.
//
// A task's accesses to all its handles are wired atomically: the handles'
// locks are taken together, in address order, and released after. Wiring
// them one by one would let two goroutines that submit at once order two
// tasks A before B on one handle and B before A on another, a dependency
// cycle that never runs (StarPU sorts a task's handles for the same
// reason). Go's heap objects do not move, so the address order is stable.
func (s *Scheduler) wire(t *Task) {
	var (
		hs    [8]wiring
		wired = hs[:0]
	)
	for i := range t.Access {
		a := t.Access[i]
		if a.Mode == ModeScratch {
			continue
		}
		dup := false
		for j := 0; j < i; j++ {
			if t.Access[j].Handle == a.Handle {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		m := a.Mode
		for j := i + 1; j < len(t.Access); j++ {
			if t.Access[j].Handle == a.Handle {
				m |= t.Access[j].Mode
			}
		}
		wired = append(wired, wiring{a.Handle, m})
	}
	if len(wired) > 1 {
		slices.SortFunc(wired, func(x, y wiring) int {
			return cmp.Compare(uintptr(unsafe.Pointer(x.h)), uintptr(unsafe.Pointer(y.h)))
		})
	}
	for _, w := range wired {
		w.h.mu.Lock()
	}
	for _, w := range wired {
		s.wireAccessLocked(t, w.h, w.m)
	}
	for _, w := range wired {
		w.h.mu.Unlock()
	}
	for _, p := range t.After {
		if p != nil {
			s.addDep(p, t)
		}
	}
	for _, g := range t.AfterTags {
		s.addTagDep(g, t)
	}
	if t.Tag != 0 {
		s.declareTag(t)
	}
}

// wiring is one handle of a task to wire and the union of its modes.
type wiring struct {
	h *Handle
	m Mode
}

// wireAccessLocked makes t depend on the previous accesses to h, after
// StarPU's sequential consistency: accesses are grouped into runs of
// compatible ones (reads, commuting writes, reductions); a task depends
// on the group before its own, and a write starts a new group.
// h.mu is held.
func (s *Scheduler) wireAccessLocked(t *Task, h *Handle, m Mode) {
	if err := h.usableLocked(); err != nil {
		t.fail(err)
		return
	}
	if !h.implicit {
		// Remember users only, for Unregister.
		h.cur = appendPruned(h.cur, t)
		return
	}
	cat := category(m)
	if h.curCat == catRedux && cat != catRedux {
		h.flushReduxLocked()
	}
	// A task that only writes h starts a new version of it: it is
	// ordered after the earlier accesses but does not need their data, so
	// their failure does not cancel it (it is how a handle recovers after
	// a failed task).
	weak := m == ModeW
	if cat == h.curCat && cat != catWrite && cat != catSync {
		for _, p := range h.prev {
			s.addDepMode(p, t, weak)
		}
		h.cur = appendPruned(h.cur, t)
	} else {
		for _, p := range h.cur {
			s.addDepMode(p, t, weak)
		}
		old := h.prev
		clear(old)
		h.prev = h.cur
		h.cur = append(old[:0], t)
		h.curCat = cat
	}
	if cat == catRedux {
		s.regMu.Lock()
		s.reduxLive[h] = struct{}{}
		s.regMu.Unlock()
	}
}

// appendPruned appends t, first dropping completed tasks when the slice
// is full, so long runs of readers do not grow without bound.
func appendPruned(ts []*Task, t *Task) []*Task {
	if len(ts) == cap(ts) && len(ts) >= 16 {
		n := 0
		for _, x := range ts {
			if x.state.Load() < stateDone {
				ts[n] = x
				n++
			}
		}
		clear(ts[n:])
		ts = ts[:n]
	}
	return append(ts, t)
}

// flushReduxLocked ends a group of Redux accesses to h: it submits the
// task that combines the per-worker copies into h, which the next
// accesses depend on. h.mu is held.
func (h *Handle) flushReduxLocked() {
	if h.curCat != catRedux {
		return
	}
	s := h.s
	combine := h.rcombine
	r := &Task{Codelet: &Codelet{Name: "redux:" + combine.name(), CPU: h.reduceInto}}
	r.Access = append(r.inlineAcc[:0], Access{h, ModeRW})
	r.state.Store(stateSubmitted)
	r.s = s
	r.pending.Store(1)
	if s.cfg.stats {
		r.id = s.nextID.Add(1)
	}
	s.inflight.add(1)
	for _, p := range h.cur {
		s.addDep(p, r)
	}
	old := h.prev
	clear(old)
	h.prev = h.cur
	h.cur = append(old[:0], r)
	h.curCat = catWrite
	s.regMu.Lock()
	delete(s.reduxLive, h)
	s.regMu.Unlock()
	if r.pending.Add(-1) == 0 {
		s.ready(r, nil)
	}
}

// reduceInto is the reduction task: combine every live per-worker copy
// into the handle (buffer 0).
func (h *Handle) reduceInto(c *Call) error {
	cc := Call{Task: c.Task, Worker: c.Worker, Size: 1}
	pair := [2]*buffer{c.bufs[0], nil}
	for _, rc := range h.rcopies {
		if rc == nil || !rc.live {
			continue
		}
		rc.live = false
		pair[1] = rc.buf
		cc.bufs = pair[:]
		if err := h.rcombine.CPU(&cc); err != nil {
			return fmt.Errorf("combining a reduction copy of %v: %w", h, err)
		}
	}
	return nil
}

// sealed marks a completed task's successor stack.
var sealed = &edge{}

// addDep makes t wait for p, and cancels t if p fails.
func (s *Scheduler) addDep(p, t *Task) { s.addDepMode(p, t, false) }

// addDepMode makes t wait for p; unless weak, p's failure cancels t.
// Lock-free: t's edge is pushed on p's successor stack unless p has
// sealed it by completing.
func (s *Scheduler) addDepMode(p, t *Task, weak bool) {
	if p == t {
		return
	}
	if s.cfg.stats {
		// Traced even when p has already completed: the dependency is
		// part of the graph whatever the timing.
		t.preds = append(t.preds, p.id)
	}
	if st := p.state.Load(); st >= stateDone {
		if st == stateFailed && !weak {
			t.cancel(p.err)
		}
		return
	}
	e := t.newEdge()
	e.weak = weak
	t.pending.Add(1)
	for {
		head := p.succs.Load()
		if head == sealed {
			// p completed meanwhile; its state and err are set.
			t.pending.Add(-1)
			if p.state.Load() == stateFailed && !weak {
				t.cancel(p.err)
			}
			return
		}
		e.next = head
		if p.succs.CompareAndSwap(head, e) {
			break
		}
	}
}

// cancel marks t as not to be run because a predecessor failed with err.
func (t *Task) cancel(err error) {
	var root error = err
	var ce *canceledError
	if errors.As(err, &ce) {
		root = ce.cause
	}
	t.fail(&canceledError{name: t.Codelet.name(), cause: root})
}

// fail marks t as not to be run, with err as its error.
func (t *Task) fail(err error) {
	t.mu.Lock()
	if t.depErr == nil {
		t.depErr = err
	}
	t.mu.Unlock()
}

// canceledError is the error of a canceled task; cause is the error of
// the task that failed (never another canceledError, so chains of
// cancellations do not grow messages).
type canceledError struct {
	name  string
	cause error
}

func (e *canceledError) Error() string {
	msg := e.cause.Error()
	for i := 0; i < len(msg); i++ {
		if msg[i] == '\n' {
			msg = msg[:i]
			break
		}
	}
	return fmt.Sprintf("scheduler: task %q canceled: a task it depends on failed: %s", e.name, msg)
}

func (e *canceledError) Unwrap() []error { return []error{ErrCanceled, e.cause} }

// ready hands a task whose dependencies are satisfied to the policy, or
// completes it at once if it is canceled. w is the calling worker, nil
// for other goroutines.
func (s *Scheduler) ready(t *Task, w *worker) {
	var buf [8]*Task
	q := append(buf[:0], t)
	for len(q) > 0 {
		t := q[len(q)-1]
		q = q[:len(q)-1]
		if err := t.readErr(); err != nil {
			q = s.finish(t, err, w, q)
			continue
		}
		if t.commute && !s.acquireCommute(t) {
			continue
		}
		s.push(t, w)
	}
}

func (t *Task) readErr() error {
	// depErr is written before the writer's atomic decrement of pending,
	// and we observed pending reach zero after it: the read is ordered.
	return t.depErr
}

// push hands a ready task to its context (the global one for none).
func (s *Scheduler) push(t *Task, w *worker) { s.contextOf(t).push(t, w, true) }

// acquireCommute takes the commute tokens of t's commuting handles in a
// fixed order, or none: if one is held, t waits on that handle and is
// retried when its owner releases it (no hold-and-wait, no deadlock).
func (s *Scheduler) acquireCommute(t *Task) bool {
	for i, a := range t.Access {
		if a.Mode&ModeCommute == 0 || firstIndex(t.Access, a.Handle) != i {
			continue
		}
		h := a.Handle
		h.cmu.Lock()
		if h.cowner == nil || h.cowner == t {
			h.cowner = t
			h.cmu.Unlock()
			continue
		}
		h.cwait = append(h.cwait, t)
		h.cmu.Unlock()
		s.releaseCommute(t, i)
		return false
	}
	return true
}

func firstIndex(acc []Access, h *Handle) int {
	for i, a := range acc {
		if a.Handle == h {
			return i
		}
	}
	return -1
}

// releaseCommute releases the tokens t holds among its first n accesses
// and retries the tasks waiting for them.
func (s *Scheduler) releaseCommute(t *Task, n int) {
	for i, a := range t.Access[:n] {
		if a.Mode&ModeCommute == 0 || firstIndex(t.Access, a.Handle) != i {
			continue
		}
		h := a.Handle
		h.cmu.Lock()
		if h.cowner != t {
			h.cmu.Unlock()
			continue
		}
		h.cowner = nil
		waiters := h.cwait
		h.cwait = nil
		h.cmu.Unlock()
		for _, wt := range waiters {
			if s.acquireCommute(wt) {
				s.push(wt, nil)
			}
		}
	}
}

// finish completes t with err (nil on success): records the error, runs
// the callback, wakes waiters and releases successors, appending to q
// the ones that became ready. w is the calling worker or nil.
func (s *Scheduler) finish(t *Task, err error, w *worker, q []*Task) []*Task {
	if t.commute {
		s.releaseCommute(t, len(t.Access))
	}
	if err != nil {
		s.recordTask(t, err)
	}
	if t.Callback != nil {
		wid := -1
		if w != nil {
			wid = w.info.ID
		}
		if cerr := callSafely(t, wid); cerr != nil {
			s.recordTask(t, cerr)
			if err == nil {
				err = cerr
			}
		}
	}
	t.err = err
	if err != nil {
		t.state.Store(stateFailed)
	} else {
		t.state.Store(stateDone)
	}
	for e := t.succs.Swap(sealed); e != nil; e = e.next {
		st := e.t
		if err != nil && !e.weak {
			st.cancel(err)
		}
		if st.pending.Add(-1) == 0 {
			q = append(q, st)
		}
	}
	if t.waited.Load() {
		t.mu.Lock()
		if t.doneCh != nil && !t.chDone {
			t.chDone = true
			close(t.doneCh)
		}
		t.mu.Unlock()
	}
	if t.Tag != 0 {
		q = s.tagDone(t, err, q)
	}
	if t.Context != nil {
		t.Context.taskDone(t)
	}
	if w != nil {
		w.doneBatch++
		if w.doneBatch >= 64 {
			w.flushDone()
		}
	} else {
		s.inflight.add(-1)
	}
	return q
}

// callSafely runs t's callback, turning a panic into an error.
func callSafely(t *Task, worker int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError(t, worker, r, "callback: ")
		}
	}()
	t.Callback(t)
	return nil
}

// WaitAll blocks until every task submitted so far (and every task they
// release) has completed, or ctx ends. It returns the errors of the
// tasks that failed since the previous WaitAll, joined, plus one error
// wrapping ErrCanceled that counts the tasks canceled because of them.
// With a ctx carrying a scheduling context (Within), it waits for that
// context's tasks only (Context.WaitAll), as StarPU's
// starpu_task_wait_for_all does within starpu_sched_ctx_set_context.
// When ctx ends while a context holds tasks and has no workers, the
// error also wraps ErrNoWorkers and names the context.
func (s *Scheduler) WaitAll(ctx context.Context) error {
	if s.cx.n.Load() > 0 {
		if c := ContextOf(ctx); c != nil && c.s == s && c.parent != nil {
			return c.WaitAll(ctx)
		}
	}
	if err := s.inflight.wait(ctx); err != nil {
		return s.stuckError(fmt.Errorf("scheduler: WaitAll: %w (%d tasks not completed)", err, max(s.inflight.n.Load(), 0)))
	}
	return errors.Join(s.errs.take(""), s.takeContextErrors())
}

// Wait blocks until the given tasks have completed or ctx ends, and
// returns their errors joined.
func (s *Scheduler) Wait(ctx context.Context, tasks ...*Task) error {
	var errs []error
	for _, t := range tasks {
		if err := t.Wait(ctx); err != nil {
			if ctx.Err() != nil {
				return err
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close waits for every submitted task, stops the workers, saves the
// calibrated performance models and writes the trace if one was asked
// for. It returns the errors of tasks not yet reported by WaitAll and
// of those steps. Further submissions fail with ErrClosed. Close is
// idempotent: later calls return the first call's result.
func (s *Scheduler) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		var errs []error
		// Reductions still pending are combined before the workers stop.
		s.regMu.Lock()
		var pend []*Handle
		for h := range s.reduxLive {
			pend = append(pend, h)
		}
		s.regMu.Unlock()
		for _, h := range pend {
			h.mu.Lock()
			h.flushReduxLocked()
			h.mu.Unlock()
		}
		s.drainContexts()
		errs = append(errs, s.WaitAll(context.Background()))
		s.closedAt = time.Now()
		s.stopWorkers()
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
}
