package scheduler

import (
	"context"
	"fmt"
	"strings"
)

// Stage 1 of a task: submission. SubmitTask validates the task, counts
// it in flight and in its context, and hands it to the dependency stage
// (deps.go); a task with no pending predecessor goes on to ready.go.

// enterContext resolves t's context (Task.Context, else the default of
// ctx, else the global context), sets Task.Context to it and counts t in
// it; it fails for a context that refuses tasks, leaving Task.Context
// unchanged.
func (s *Scheduler) enterContext(ctx context.Context, t *Task) error {
	c := t.Context
	if c == nil {
		c = ContextOf(ctx)
		if c == nil {
			t.Context = s.cx.global
			return nil
		}
	}
	if c.s != s {
		return fmt.Errorf("%w: task %q submitted to %q of another scheduler", ErrBadContext, t.Codelet.name(), c.name)
	}
	if c.parent == nil {
		t.Context = c
		return nil
	}
	if t.Team > 1 {
		n := 0
		for _, id := range c.Workers() {
			if s.workers[id].info.Kind == CPUWorker {
				n++
			}
		}
		if t.Team > n {
			return fmt.Errorf("%w: task %q asks for a team of %d workers, context %q has %s (teams run on CPU workers)", ErrBadTeam, t.Codelet.name(), t.Team, c.name, cpuWorkersN(n))
		}
	}
	// A task that none of the context's workers can run would wait for
	// ever (an empty context's tasks wait for workers to arrive).
	if k := kindSet(c.kinds.Load()); k != 0 && t.Codelet.Detached == nil && t.kinds()&k == 0 {
		return s.unrunnableError(t, c)
	}
	for _, x := range c.ancestors {
		x.pending.add(1)
	}
	if st := c.state.load(); !st.accepting() {
		c.leaveCount()
		if st == ctxDeleted {
			return fmt.Errorf("task %q: %w: %w: %q", t.Codelet.name(), ErrContextStopped, ErrContextDeleted, c.name)
		}
		return fmt.Errorf("task %q: %w: %q (stopped, finished or being deleted)", t.Codelet.name(), ErrContextStopped, c.name)
	}
	t.Context = c
	if t.Team > 1 {
		c.countTeam(t.Team, 1)
	}
	return nil
}

// noImplementationError is the refusal of a codelet that no worker of
// the scheduler can run: it counts the workers of each kind and gives
// the fix that applies.
func (s *Scheduler) noImplementationError(cl *Codelet) error {
	why := "has no implementation"
	fix := "give it a CPU function (CPU and sim workers run it)"
	switch {
	case cl.CUDA != nil && s.cfg.cuda.absent != "":
		why = "has only a CUDA implementation and there is no CUDA worker"
		fix += ", or run it where there is a CUDA GPU: GPUs were asked for, but " + s.cfg.cuda.absent
	case cl.CUDA != nil:
		why = "has only a CUDA implementation and there is no CUDA worker"
		fix += ", or run it where there is a CUDA GPU (WithCUDA)"
	case s.kinds[CUDAWorker] > 0:
		fix += ", or a CUDA function (CUDA workers run it)"
	}
	return fmt.Errorf("%w: codelet %q %s here (%d cpu, %d sim, %d cuda workers); %s",
		ErrNoImplementation, cl.name(), why, s.kinds[CPUWorker], s.kinds[SimWorker], s.kinds[CUDAWorker], fix)
}

// unrunnableError is the refusal of t, submitted to c, when none of c's
// workers can run it: it names the task, the context and its workers,
// what keeps the task off them (the handle whose data stay in RAM, or
// the implementation missing) and the fix.
func (s *Scheduler) unrunnableError(t *Task, c *Context) error {
	cl := t.Codelet
	var n [numKinds]int
	for _, id := range c.Workers() {
		n[s.workers[id].info.Kind]++
	}
	var have []string
	for k := range numKinds {
		if n[k] > 0 {
			have = append(have, fmt.Sprintf("%d %v", n[k], k))
		}
	}
	why := fmt.Sprintf("codelet %q has no implementation for them", cl.name())
	fix := "give it a CPU function (CPU and sim workers run it)"
	if cl.CPU != nil {
		fix = "give it a CUDA function (CUDA workers run it)"
	}
	if (cl.CPU != nil && (n[SimWorker] > 0 || n[CUDAWorker] > 0 && cl.CUDA != nil)) || (cl.CUDA != nil && n[CUDAWorker] > 0) {
		// An implementation fits the devices' workers: the data do not.
		for _, a := range t.Access {
			if h := a.Handle; !h.dev {
				why = fmt.Sprintf("%v is a value handle, which stays on CPU workers", h)
				if h.name == "" {
					why = fmt.Sprintf("%v stays on CPU workers", h) // "value handle *int"
				}
				if h.kind != kindValue {
					why = fmt.Sprintf("%v holds %v, which stays in RAM (only vectors and matrices of numbers move to devices)", h, h.ram.typ)
				}
				break
			}
		}
		fix = "register the data as a vector or matrix of numbers"
		if t.Team > 1 {
			why, fix = fmt.Sprintf("it asks for a team of %d (teams run on CPU workers)", t.Team), "drop the team"
		}
	}
	if cl.CPU != nil {
		fix += fmt.Sprintf(", add a CPU worker to %q (AddWorkers, MoveWorkers), or submit it to a context with one", c.name)
	}
	return fmt.Errorf("%w: task %q cannot run in context %q: none of its workers (%s) can run it: %s; %s",
		ErrNoImplementation, cl.name(), c.name, strings.Join(have, ", "), why, fix)
}

// Submit creates a task of cl with the given accesses and options and
// submits it (see SubmitTask). It does not wait for the task unless
// Synchronous is among args.
func (s *Scheduler) Submit(ctx context.Context, cl *Codelet, args ...Arg) error {
	return s.submit(ctx, cl, args, nil)
}

// submit is Submit; a task ready at once runs on worker run, when not
// nil, if it may (see submitTask).
func (s *Scheduler) submit(ctx context.Context, cl *Codelet, args []Arg, run *worker) error {
	// The caller never sees this Task. Without a callback, a tag, a
	// synchronous wait or a team, what keeps it once it completed is
	// counted (the access lists of its handles, see hold): nobody else
	// waits on it, no tag names it, no worker reads a forming team's task.
	// So it comes from a pool and goes back when the last reference goes:
	// no allocation per task.
	t := s.newTask(cl, args)
	err := s.submitTask(ctx, t, run)
	if err != nil {
		s.discard(t)
	}
	return err
}

// discard returns to the pool a task of newTask whose submission failed:
// it was never wired, so nothing else refers to it.
func (s *Scheduler) discard(t *Task) {
	if t.pooled {
		s.tasks.put(t, nil)
	}
}

// newTask returns a task of cl with args for Submit: from the pool when
// nothing keeps it once completed (see submit).
func (s *Scheduler) newTask(cl *Codelet, args []Arg) *Task {
	// One pass over args: apply reports whether they let the task be
	// pooled. A task that may not (the caller's callback, tag or wait
	// keeps it) is taken from the pool all the same and never goes back:
	// the collector frees it, as one of new(Task).
	t := s.tasks.get()
	t.Codelet = cl
	t.pooled = t.apply(args) // wire counts a pooled task's references (refs)
	return t
}

// poolable reports whether a task of Submit with these arguments may be
// reused once completed (see Submit).
func poolable(args []Arg) bool {
	for i := range args {
		switch args[i].kind {
		case argCallback, argTag, argSync:
			return false
		case argTeam:
			if args[i].n > 1 {
				return false
			}
		}
	}
	return true
}

// hold adds a reference to a task of Submit's pool: one per handle
// access list that holds it, besides the one of its execution.
func (t *Task) hold() {
	if t.pooled {
		t.refs.Add(1)
	}
}

// release drops a reference to a task of Submit's pool (see hold); the
// last one returns it to the pool.
func (s *Scheduler) release(t *Task) { s.releaseBy(t, 1, nil) }

// releaseN drops n references to a task of Submit's pool (see release).
func (s *Scheduler) releaseN(t *Task, n int32) { s.releaseBy(t, n, nil) }

// release is Scheduler.release on worker w's goroutine: a task it frees
// goes to the worker's batch of freed tasks (taskPool.put).
func (w *worker) release(t *Task) { w.s.releaseBy(t, 1, w) }

// releaseBy drops n references to a task of Submit's pool on worker w's
// goroutine (nil: another goroutine).
func (s *Scheduler) releaseBy(t *Task, n int32, w *worker) {
	if !t.pooled || t.refs.Add(-n) != 0 {
		return
	}
	s.tasks.put(t, w)
}

// SubmitTask submits t: it becomes ready when its dependencies - implicit
// ones from the previous accesses to its handles, After tasks, AfterTags
// - have completed, and then the policy gives it to a worker. It returns
// an error, and the task is not submitted, for invalid input (see the
// package's errors); an error of the task itself is reported by Wait,
// Task.Err and WaitAll. Submission does not block (unless t is
// synchronous, see Synchronous) and costs well under a microsecond.
func (s *Scheduler) SubmitTask(ctx context.Context, t *Task) error {
	return s.submitTask(ctx, t, nil)
}

// submitTask is SubmitTask; when run is not nil (a Driver's worker), a
// task that is ready at once runs on it before submitTask returns, if
// runsAtSubmit allows, instead of being queued.
func (s *Scheduler) submitTask(ctx context.Context, t *Task, run *worker) error {
	return s.submitHeld(ctx, t, run, nil)
}

// submitHeld is submitTask; with a batch b it leaves t held (its
// submission's own count in pending kept) and adds it to b, which
// releases it at Flush.
func (s *Scheduler) submitHeld(ctx context.Context, t *Task, run *worker, b *Batch) error {
	if t == nil {
		return errNilTask
	}
	// A non-blocking receive on Done is cheaper than ctx.Err, which
	// locks a cancelable context's mutex (shared by all submitters).
	// A context that is never canceled (Background) has no channel.
	if done := ctx.Done(); done != nil {
		select {
		case <-done:
			return fmt.Errorf("scheduler: submitting %q: %w", t.Codelet.name(), ctxErr(ctx))
		default:
		}
	}
	if b != nil && t.sync {
		return fmt.Errorf("%w: task %q is synchronous, but a batch holds its tasks until Flush: it would wait for itself", ErrBadOption, t.Codelet.name())
	}
	if t.sync {
		// Refused before anything is submitted.
		if err := s.checkNotInTask(fmt.Sprintf("Submit of the Synchronous task %q", t.Codelet.name())); err != nil {
			return err
		}
	}
	if !t.pooled && !s.claim(t) {
		return fmt.Errorf("%w: task %q belongs to another scheduler (submitted there, or named in After by one of its tasks)", ErrBadData, t.Codelet.name())
	}
	if t.pooled {
		// A task of newTask, which no other goroutine can see yet.
		storeUnpublishedU(&t.state, stateSubmitted)
	} else if !t.state.CompareAndSwap(stateNew, stateSubmitted) {
		if s.closed.Load() {
			// Close's own refusal, also for a task Close failed as
			// never submitted.
			return fmt.Errorf("submitting %q: %w", t.Codelet.name(), ErrClosed)
		}
		return fmt.Errorf("%w: %q", ErrAlreadySubmitted, t.Codelet.name())
	}
	if err := s.validate(t); err != nil {
		s.unsubmit(t)
		return err
	}
	// Counting the task before checking closed makes Close wait for it
	// (Close sets closed, then waits for inflight to reach 0).
	s.inflight.add(1)
	if s.closed.Load() {
		s.inflight.add(-1)
		s.unsubmit(t)
		return fmt.Errorf("submitting %q: %w", t.Codelet.name(), ErrClosed)
	}
	if t.Context != nil || s.cx.n.Load() > 0 {
		if err := s.enterContext(ctx, t); err != nil {
			s.inflight.add(-1)
			s.unsubmit(t)
			return err
		}
	} else {
		t.Context = s.cx.global // no context but the global one
	}
	t.s = s
	if s.cfg.stats {
		t.id = s.nextID.Add(1)
		s.noteCodelet(t.Codelet, t.id)
	}
	if t.Codelet.Model != nil {
		t.footprint = footprint(t.Access)
		t.hasFoot = true
	}
	sync := t.sync // t may complete (and a pooled t be reused) once ready
	// t.pending is 0 here (a new or pooled task; a failed submission
	// does not touch it), and only the edges wire pushes count it down,
	// below zero until their count is added (pushEdge).
	edges := s.wire(t)
	if b != nil {
		// Held after wiring, with the submission's own count that Flush
		// takes: a Flush from another goroutine (WaitAll's) must not take
		// it while wiring pushes edges.
		t.pending.Add(edges + 1)
		b.hold(t)
		return nil
	}
	if edges == 0 || t.pending.Add(edges) == 0 {
		if run != nil && run.runsAtSubmit(t) {
			run.execute(t)
		} else {
			s.ready(t, nil)
		}
	}
	if sync {
		return t.Wait(ctx)
	}
	return nil
}

// claim makes s the owner of t (a task of NewTask: Submit's own are
// made by s) unless another scheduler is; it reports whether s is. A
// task's dependencies (After) and its completion's releases stay inside
// one scheduler: a task of A that waited for one run by B would never be
// counted by A's WaitAll and Close, or would release a task that B does
// not count.
func (s *Scheduler) claim(t *Task) bool {
	o := t.owner.Load()
	if o == nil && t.owner.CompareAndSwap(nil, s) {
		return true
	}
	return t.owner.Load() == s
}

// errNilTask is the refusal of a nil *Task, like Submit's of a nil
// codelet.
var errNilTask = fmt.Errorf("%w: a nil task (create it with NewTask(codelet, args...))", ErrNoImplementation)

// validate checks t before anything is changed.
func (s *Scheduler) validate(t *Task) error {
	cl := t.Codelet
	if cl == nil {
		return fmt.Errorf("%w: task without a codelet", ErrNoImplementation)
	}
	if cl.Model != nil && cl.Model.Name == "" {
		return fmt.Errorf("%w: codelet %q has a performance model with an empty name; name it (HistoryModel(name)): the name keys its measurements and names its file", ErrBadModel, cl.name())
	}
	if cl.Detached != nil {
		if t.Team > 1 {
			return fmt.Errorf("%w: detached codelet %q cannot run with a team of %d", ErrBadTeam, cl.name(), t.Team)
		}
	} else if (cl.CPU == nil || s.kinds[CPUWorker] == 0) && (cl.CUDA == nil || s.kinds[CUDAWorker] == 0) {
		return s.noImplementationError(cl)
	} else if cl.CPU == nil && t.Team > 1 {
		return fmt.Errorf("%w: codelet %q has only a CUDA implementation and cannot run with a team of %d (teams run on CPU workers)", ErrBadTeam, cl.name(), t.Team)
	}
	if t.Team < 0 {
		return fmt.Errorf("%w: task %q asks for a team of %d workers; WithTeam(n) takes n >= 0 (0 and 1 run the task on one worker)", ErrBadTeam, cl.name(), t.Team)
	}
	if t.Team > s.kinds[CPUWorker] {
		return fmt.Errorf("%w: task %q asks for a team of %d workers, the scheduler has %s (teams run on CPU workers)", ErrBadTeam, cl.name(), t.Team, cpuWorkersN(s.kinds[CPUWorker]))
	}
	if s.cx.ngone.Load() > 0 {
		if err := s.checkRetired(t); err != nil {
			return err
		}
	}
	acc := t.Access
	for i := range acc {
		a := &acc[i]
		h := a.Handle
		if h == nil {
			return fmt.Errorf("%w: task %q access %d has a nil handle", ErrBadData, cl.name(), i)
		}
		if h.s != s {
			return fmt.Errorf("%w: task %q access %d uses %v", ErrForeignHandle, cl.name(), i, h)
		}
		// R, W or RW (1, 2, 3): valid, and none of the checks below the
		// status applies.
		plain := a.Mode-1 < ModeRW
		if !plain && !a.Mode.valid() {
			return fmt.Errorf("%w: task %q access %d on %v has mode %v; use R, W, RW, Scratch, Redux or Commute", ErrInvalidMode, cl.name(), i, h, a.Mode)
		}
		if st := h.status.Load(); st != handleLive {
			switch st {
			case handlePartitioned:
				return fmt.Errorf("task %q access %d: %w: %v is partitioned into tiles; access the tiles, or Unpartition it first", cl.name(), i, ErrPartitioned, h)
			case handleUnregistered:
				return fmt.Errorf("task %q access %d: %w: %v is no longer registered (unregistered, or a tile of an unpartitioned handle)", cl.name(), i, ErrUnregistered, h)
			}
		}
		if !plain {
			if err := s.validateMode(t, i); err != nil {
				return err
			}
		}
		for j := range acc[:i] {
			if b := &acc[j]; b.Handle == h {
				if b.Mode != a.Mode && ((a.Mode|b.Mode)&(ModeScratch|ModeRedux|ModeCommute) != 0) {
					return fmt.Errorf("%w: task %q accesses %v as both %v and %v", ErrInvalidMode, cl.name(), h, b.Mode, a.Mode)
				}
				t.dupAccess = true
			}
		}
	}
	if t.Tag != 0 {
		if err := s.checkTags(t); err != nil {
			return err
		}
	}
	if len(t.After) > 0 {
		if err := s.checkAfter(t); err != nil {
			return err
		}
	}
	if cl.Detached == nil && (cl.CPU == nil || s.kinds[CPUWorker] == 0) && !t.deviceData() {
		return fmt.Errorf("%w: codelet %q can run only on GPUs, and task's data cannot go there (a value handle); give it a CPU function", ErrNoImplementation, cl.name())
	}
	return nil
}

// validateMode checks t's access i of a mode other than R, W and RW
// (Scratch, Redux, Commute), and marks t for those it finds.
func (s *Scheduler) validateMode(t *Task, i int) error {
	cl := t.Codelet
	a := t.Access[i]
	h := a.Handle
	if a.Mode == ModeRedux {
		s.handleMu.Lock()
		ok := h.rcombine != nil
		s.handleMu.Unlock()
		if !ok {
			return fmt.Errorf("%w: task %q uses Redux on %v, which has no reduction; call SetReduction first", ErrInvalidMode, cl.name(), h)
		}
		t.redux = true
	}
	if (a.Mode == ModeRedux || a.Mode == ModeScratch) && h.kind == kindValue {
		if _, err := h.ram.newLike(kindValue); err != nil {
			return fmt.Errorf("task %q access %d: %w", cl.name(), i, err)
		}
	}
	if a.Mode&ModeCommute != 0 {
		t.commute = true
	}
	return nil
}

// runsAtSubmit reports whether worker w, submitting t (ready at once),
// may run it there and then instead of queueing it: a plain CPU task
// (no team, commute, detached completion or priority to order it by,
// not canceled) outside scheduling contexts and monitoring, with no
// context change pending for w.
func (w *worker) runsAtSubmit(t *Task) bool {
	s := w.s
	return t.Team <= 1 && !t.commute && t.Codelet.Detached == nil && t.Priority == 0 &&
		t.Context.parent == nil && t.readErr() == nil && t.CanRunOn(w.info.Kind) &&
		!w.cx.moveReq.Load() && s.cx.n.Load() == 0 && s.cx.mon.Load() == nil && !s.stopping.Load()
}

// checkRetired refuses t when the workers left, once driven workers
// have left the scheduler (their drivers ended, see Driver.Deinit),
// cannot run it: a team larger than the CPU workers left, or a task no
// worker left can run (every worker driven, every driver ended).
func (s *Scheduler) checkRetired(t *Task) error {
	cl := t.Codelet
	var gone []string
	for _, w := range s.workers {
		if w.retired.Load() {
			gone = append(gone, fmt.Sprint(w.info.ID))
		}
	}
	if len(gone) == 0 {
		return nil
	}
	left := s.kinds[CPUWorker] - len(gone) // driven workers are CPU workers
	why := fmt.Sprintf("driven worker %s left the scheduler when its driver ended (Run returned, or Deinit)", strings.Join(gone, ", "))
	if len(gone) > 1 {
		why = fmt.Sprintf("driven workers %s left the scheduler when their drivers ended (Run returned, or Deinit)", strings.Join(gone, ", "))
	}
	if t.Team > left {
		return fmt.Errorf("%w: task %q asks for a team of %d workers, the scheduler has %s left: %s", ErrBadTeam, cl.name(), t.Team, cpuWorkersN(left), why)
	}
	if cl.Detached == nil && (cl.CPU == nil || left+s.kinds[SimWorker] == 0) && (cl.CUDA == nil || s.kinds[CUDAWorker] == 0) {
		return fmt.Errorf("%w: task %q: no worker is left to run it: %s; submit before the drivers end, or keep one driving until Close", ErrDriver, cl.name(), why)
	}
	return nil
}
