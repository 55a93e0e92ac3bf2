package scheduler

import "errors"

// Stage 5: completion. A task that ran (or was canceled) is completed:
// its error recorded, its callback run, its waiters woken and its
// successors released, back to ready.go.

// recordTask keeps t's error for the WaitAll of its context.
func (s *Scheduler) recordTask(t *Task, err error) {
	if c := t.Context; c != nil && c.parent != nil {
		c.errs.record(err)
		return
	}
	s.errs.record(err)
}

// leaveCount uncounts one task of c and runs c's (or an ancestor's)
// closing action if it was the last.
func (c *Context) leaveCount() {
	for _, x := range c.ancestors {
		if x.pending.add(-1) == 0 {
			x.settle()
		}
	}
}

// taskDone is called once per completed task t of c.
func (c *Context) taskDone(t *Task) {
	if t.Team > 1 {
		c.countTeam(t.Team, -1)
	}
	if c.cluster {
		c.policy.(*clusterPolicy).running.Store(false)
		c.wakeAll()
	}
	if c.parent != nil {
		c.leaveCount()
	}
}

// finish completes t with err (nil on success): records the error, runs
// the callback, wakes waiters and releases successors, appending to q
// the ones that became ready. w is the calling worker or nil.
func (s *Scheduler) finish(t *Task, err error, w *worker, q []*Task) []*Task {
	if t.commute {
		s.releaseCommute(t, len(t.Access))
	}
	if err != nil && !(t.engine && errors.Is(err, ErrCanceled)) {
		// A reduction's combination or a partition's gather canceled
		// with the user's tasks is not counted among them; its own
		// failure (a combine function's error) is reported.
		s.recordTask(t, err)
	}
	if t.Callback != nil || t.onDone != nil {
		// The callback sees the outcome through Task.Err.
		t.err = err
		t.inCallback.Store(true)
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
	if len(t.After) > 0 {
		// Done, t waits for nothing: forget its predecessors, or a loop
		// of tasks each After(prev) would keep every task of the chain
		// reachable from the last. Before the state is stored, so that a
		// program that reads After once Wait or Done has returned reads
		// nil, with no race. A walk for a cycle (afterCycleLocked) reads
		// After under s.tagMu, after seeing t not done.
		s.tagMu.Lock()
		t.After = nil
		s.tagMu.Unlock()
	}
	t.err = err
	if err != nil {
		t.state.Store(stateFailed)
	} else {
		t.state.Store(stateDone)
	}
	for e := t.succs.Swap(sealed); e != nil; {
		// An edge lives in its successor, which may run, complete and
		// be recycled (Submit's pool) as soon as its count reaches zero:
		// read the edge first.
		st, next, weak := e.t, e.next, e.weak
		if err != nil && !weak {
			st.cancel(err)
		}
		if st.pending.Add(-1) == 0 {
			q = append(q, st)
		}
		e = next
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
	if c := t.Context; c.parent != nil {
		c.taskDone(t)
	}
	if wd := s.wd; wd != nil {
		if w != nil {
			w.wdDone.Add(1)
		} else {
			wd.done.Add(1)
		}
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

// callSafely runs t's callbacks (Callback, then onDone), turning a panic into an error.
func callSafely(t *Task, worker int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError(t, worker, r, "callback: ")
		}
	}()
	if t.Callback != nil {
		t.Callback(t)
	}
	if t.onDone != nil {
		t.onDone(t.err)
	}
	return nil
}

// flushDone publishes the worker's batched completion count.
func (w *worker) flushDone() {
	// Published before the completions are counted, so that a Stats
	// after WaitAll sees every task.
	w.nTasks.Store(w.doneTasks)
	if w.doneBatch > 0 {
		n := w.doneBatch
		w.doneBatch = 0
		w.s.inflight.add(-n)
	}
}

// complete completes t and releases its dependents; with inline, it
// keeps one that it may run next itself (see canInline) and returns it.
func (w *worker) complete(t *Task, err error, inline bool) *Task {
	w.doneTasks++
	if err == nil && t.Codelet.Flops != nil {
		w.flops.Add(t.Codelet.Flops(t))
	}
	var buf [8]*Task
	q := w.s.finish(t, err, w, buf[:0])
	var next *Task
	for len(q) > 0 {
		n := q[len(q)-1]
		q = q[:len(q)-1]
		if inline && next == nil && w.canInline(n) {
			next = n
			continue
		}
		w.s.ready(n, w)
	}
	return next
}

// An inliner is a policy that can tell whether a ready task pushed by
// worker w would be popped next by w itself, so that w may run it
// without queueing it. It must answer false whenever queueing could
// order the task differently (a task already queued before it, a
// placement rule).
type inliner interface {
	inlinable(t *Task, w int) bool
}

// canInline reports whether the worker may run the ready task n at once
// instead of pushing it: a plain task (no team, no commute, not
// canceled) outside contexts and monitoring, no context change pending
// for the worker, and a policy that would have given n to this worker
// next anyway.
func (w *worker) canInline(n *Task) bool {
	s := w.s
	if n.Team > 1 || n.commute || n.Context.parent != nil || n.readErr() != nil ||
		w.cx.moveReq.Load() || s.cx.n.Load() > 0 || s.cx.mon.Load() != nil || s.stopping.Load() {
		return false
	}
	p, ok := s.policy.(inliner)
	return ok && p.inlinable(n, w.info.ID)
}
