package scheduler

import (
	"context"
	"sync/atomic"
)

// Stage 3: ready. A task whose predecessors are done takes its commute
// tokens and is pushed to its context's policy, and a worker of that
// context is woken; workers pop it (worker.go).

// push hands a ready task to c's policy and wakes a worker of c (the one
// the policy named, if asleep); notify tells the monitor (not for a task
// handed back by a leaving worker).
func (c *Context) push(t *Task, w *worker, notify bool) {
	from := -1
	if w != nil {
		from = w.info.ID
	}
	if notify {
		// Before the push: once queued, t may run and complete (and a
		// task of Submit's pool be reused) before Push returns.
		if m := c.s.cx.mon.Load(); m != nil {
			m.m.TaskPushed(c, t)
		}
	}
	// Who may run t, read before the push like the monitor's view.
	kinds := kindsAll
	if c.s.data != nil {
		kinds = t.kinds()
	}
	hint := c.policy.Push(t, from)
	if hint == NoWorker && w != nil && w.driven {
		// "The pusher pops it next" does not hold for a worker the
		// application drives: it may return to the program's own work
		// before its next cycle, so another worker must be able to
		// take the task.
		hint = AnyWorker
	}
	c.wake(hint, from, kinds)
}

// wake wakes the worker the policy named, or a sleeping worker that pops
// from c and is of one of the kinds that may run the task: with workers
// of several kinds, a CPU worker woken for a GPU-only task would find
// nothing it may run and sleep again, leaving the task to a GPU worker
// that nothing wakes.
func (c *Context) wake(hint, from int, kinds kindSet) {
	s := c.s
	switch {
	case hint == NoWorker:
		return
	case hint >= 0 && hint < len(s.workers):
		if s.wakeWorker(s.workers[hint]) || hint == from {
			return
		}
	}
	if s.nsleep.Load() == 0 {
		return
	}
	for _, id := range *c.applied.Load() {
		w := s.workers[id]
		if id != from && kinds.has(w.info.Kind) && s.wakeWorker(w) {
			return
		}
	}
}

// wakeAll wakes every sleeping worker that pops from c.
func (c *Context) wakeAll() {
	for _, id := range *c.applied.Load() {
		c.s.wakeWorker(c.s.workers[id])
	}
}

// A kindSet is a set of worker kinds.
type kindSet uint8

const kindsAll kindSet = 1<<numKinds - 1

func (k kindSet) has(kind WorkerKind) bool { return k&(1<<kind) != 0 }

// kinds returns the worker kinds that may run t.
func (t *Task) kinds() kindSet {
	var k kindSet
	for kind := range numKinds {
		if t.CanRunOn(kind) {
			k |= 1 << kind
		}
	}
	return k
}

// contextOf returns t's context, the global one for none.
func (s *Scheduler) contextOf(t *Task) *Context {
	if t.Context != nil {
		return t.Context
	}
	return s.cx.global
}

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
			s.releaseBy(t, 1, w)
			continue
		}
		if t.commute && !s.acquireCommute(t) {
			continue
		}
		if t.Codelet.Detached != nil {
			s.startDetached(t)
			continue
		}
		s.push(t, w)
	}
}

// readErr returns the error that keeps t, whose dependencies are met,
// from starting: a predecessor's failure, or its CancelOn context's end;
// nil if it may start.
func (t *Task) readErr() error {
	// depErr is written before the writer's atomic decrement of pending,
	// and we observed pending reach zero after it: the read is ordered.
	if t.depErr != nil {
		return t.depErr
	}
	return t.stopErr()
}

// stopErr returns the error of a task whose CancelOn context has ended
// (see CancelOn), or nil.
func (t *Task) stopErr() error {
	if t.stop == nil {
		return nil
	}
	select {
	case <-t.stop.Done():
		return &canceledError{name: t.Codelet.name(), cause: context.Cause(t.stop), unstarted: true}
	default:
		return nil
	}
}

// push hands a ready task to its context (the global one for none).
func (s *Scheduler) push(t *Task, w *worker) { s.contextOf(t).push(t, w, true) }

// acquireCommute takes the commute tokens of t's commuting handles in a
// fixed order, or none: if one is held, t waits on that handle and is
// retried when its owner releases it (no hold-and-wait, no deadlock).
func (s *Scheduler) acquireCommute(t *Task) bool {
retry:
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
		h.cmu.Unlock()
		// Release the tokens taken so far before waiting: once t is in
		// h's waiters, its owner's release may run t (and a pooled t
		// be reused) at any moment, so t must not be touched after.
		s.releaseCommute(t, i)
		h.cmu.Lock()
		if h.cowner == nil {
			h.cmu.Unlock()
			goto retry // released meanwhile
		}
		h.cwait = append(h.cwait, t)
		h.cmu.Unlock()
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

func (s *Scheduler) wakeWorker(w *worker) bool {
	if !w.sleeping.Load() || !w.sleeping.CompareAndSwap(true, false) {
		return false
	}
	s.nsleep.Add(-1)
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return true
}

func (s *Scheduler) wakeAll() {
	for _, w := range s.workers {
		s.wakeWorker(w)
	}
}

// startDetached hands a ready detached task to its codelet's Detached
// function (see Codelet.Detached); the done function it gets completes the
// task once. A panic in Detached fails the task, unless done was already
// called (see runDetached). With devices, the task's
// data are first made valid in RAM (and pinned there until done): what
// a detached task does elsewhere - scheduler/dist sends and receives
// them - uses the registered memory. Since that may wait for copies, it
// happens on a goroutine of its own, which ends when the data are ready.
func (s *Scheduler) startDetached(t *Task) {
	if s.data == nil || t.internal || len(t.Access) == 0 {
		s.runDetached(t, false)
		return
	}
	go func() {
		if _, err := s.data.acquireTask(t, RAM, nil, nil); err != nil {
			s.endDetached(t, &TaskError{Codelet: t.Codelet.name(), Task: t.id, Tag: t.Tag, Context: t.contextName(), Worker: -1, Err: err})
			return
		}
		s.runDetached(t, true)
	}()
}

// endDetached completes a detached task.
func (s *Scheduler) endDetached(t *Task, err error) {
	var buf [8]*Task
	q := s.finish(t, err, nil, buf[:0])
	s.release(t)
	for _, n := range q {
		s.ready(n, nil)
	}
}

// runDetached calls t's Detached function; pinned says its data are
// pinned in RAM until done.
//
// Once done has run, t is no longer the caller's: completed, a task of
// Submit's pool is zeroed and may already be another Submit's. So a
// panic in Detached fails t only if done had not been called; one after
// done cannot fail a completed task and must not read t: it is reported
// to the scheduler's WaitAll (as a panicking callback is, but on its
// own), named from what was read of t before Detached was called, and
// kept for the WaitAll of the context t was submitted to, as a task's
// failure is (Scheduler.WaitAll reports it too, when it takes it
// first). Until Detached returns, the call is counted in flight in
// that context as in the scheduler, so that its WaitAll after done
// waits for a panic to be recorded (and a Delete for the call).
func (s *Scheduler) runDetached(t *Task, pinned bool) {
	var once atomic.Bool
	complete := func(err error) {
		if pinned {
			s.data.releaseTask(t, RAM, err != nil)
		}
		if err != nil {
			if _, ok := err.(*TaskError); !ok {
				err = &TaskError{Codelet: t.Codelet.name(), Task: t.id, Tag: t.Tag, Context: t.contextName(), Worker: -1, Err: err}
			}
		}
		s.endDetached(t, err)
	}
	done := func(err error) {
		if once.Swap(true) {
			return
		}
		complete(err)
	}
	cl, id, tag, cx := t.Codelet, t.id, t.Tag, t.contextName()
	// Counted in flight until Detached returns, so that a WaitAll
	// after done waits for a panic to be recorded.
	s.inflight.add(1)
	c := t.Context
	if c != nil && c.parent == nil {
		c = nil // the global context's errors are the scheduler's
	}
	if c != nil {
		for _, x := range c.ancestors {
			x.pending.add(1)
		}
	}
	defer func() {
		r := recover()
		if r == nil {
			if c != nil {
				c.leaveCount()
			}
			s.inflight.add(-1)
			return
		}
		defer s.inflight.add(-1)
		if c != nil {
			defer c.leaveCount()
		}
		if !once.Swap(true) {
			complete(panicError(t, -1, r, "detached: "))
			return
		}
		err := panicErrorOf(cl, id, tag, cx, -1, r, "detached, after done: ")
		if c != nil {
			c.errs.record(err)
		} else {
			s.errs.record(err)
		}
	}()
	cl.Detached(t, done)
}
