package scheduler

import (
	"fmt"
	"slices"
	"sync/atomic"

	"go.uber.org/zap"
)

// A context's lifecycle is one state and named transitions:
//
//	open ──StopSubmission──▶ stopped
//	open, stopped ──FinishedSubmitting──▶ finishing ──last task──▶ finished
//	open, stopped, finishing, finished ──Delete──▶ deleting ──last task──▶ deleted
//
// Every state but open refuses tasks. At the end of finishing the
// context's own workers move to its inheritor and the context stays (it
// may get workers again); at the end of deleting they move too and the
// context goes. The transitions to finished and deleted happen once,
// under the scheduler's context lock, when the context is closing and its
// pending count is zero (whichever of the last task and the call asking
// for it comes last sees both).
type ctxState int32

const (
	ctxOpen ctxState = iota
	ctxStopped
	ctxFinishing
	ctxFinished
	ctxDeleting
	ctxDeleted
)

func (st ctxState) String() string {
	return [...]string{"open", "stopped", "finishing", "finished", "deleting", "deleted"}[st]
}

// lifecycle holds a context's state; reads are lock-free (the submit
// path), transitions are made under the scheduler's context lock.
type lifecycle struct{ v atomic.Int32 }

func (l *lifecycle) load() ctxState { return ctxState(l.v.Load()) }

func (l *lifecycle) store(st ctxState) { l.v.Store(int32(st)) }

// accepting reports whether tasks may be submitted.
func (st ctxState) accepting() bool { return st == ctxOpen }

// closing reports whether the context acts once its last task is done.
func (st ctxState) closing() bool { return st == ctxFinishing || st == ctxDeleting }

// gone reports whether the context is deleted or being deleted.
func (st ctxState) gone() bool { return st >= ctxDeleting }

// StopSubmission makes c refuse new tasks (ErrContextStopped); the tasks
// already submitted run as usual.
func (c *Context) StopSubmission() {
	s := c.s
	s.cx.mu.Lock()
	if c.state.load() == ctxOpen {
		c.state.store(ctxStopped)
	}
	s.cx.mu.Unlock()
}

// Stopped reports whether c refuses new tasks.
func (c *Context) Stopped() bool { return !c.state.load().accepting() }

// FinishedSubmitting tells the scheduler that no more tasks will be
// submitted to c (they are refused from now on): as soon as c's last task
// completes, c's workers move to its inheritor (SetInheritor, default
// its parent). c remains usable for AddWorkers and MoveWorkers.
func (c *Context) FinishedSubmitting() {
	s := c.s
	if c.parent == nil {
		return
	}
	s.cx.mu.Lock()
	if st := c.state.load(); st == ctxOpen || st == ctxStopped {
		c.state.store(ctxFinishing)
	}
	s.cx.mu.Unlock()
	c.settle()
}

// Delete deletes c: it refuses new tasks at once (ErrContextStopped),
// its queued and running tasks complete, then its workers move to
// inheritor (nil: c's parent) and c is removed; Deleted is closed then.
// Delete does not wait: use WaitAll or Deleted for that.
//
// A context being deleted needs workers to complete its tasks. When c
// has fewer than its pending tasks need (MinWorkers: none while it has
// tasks, or fewer CPU workers than a team waiting to run), Delete lends
// it the workers it lacks, free ones (in no sub-context) of the
// inheritor first, then of c's parent, the lowest ids first; they are
// recorded as "delete" resizes, and move to the inheritor with c's own
// workers when c's last task completes. When there are not enough,
// c's tasks wait, and WaitAll with a deadline says so (ErrNoWorkers):
// until c's last task completes, AddWorkers and MoveWorkers still give
// it workers, while removing workers from it, moving them out of it and
// deleting it again fail with ErrContextDeleted ("being deleted").
//
// Delete fails, changing nothing, for the global context, a context with
// sub-contexts (delete them first), a context deleted or being deleted,
// an inheritor that is c, inside c, deleted or foreign (ErrBadContext),
// and after Close (ErrClosed).
func (c *Context) Delete(inheritor *Context) error {
	s := c.s
	s.cx.mu.Lock()
	var err error
	switch {
	case c.parent == nil:
		err = fmt.Errorf("%w: the global context cannot be deleted", ErrBadContext)
	case s.closed.Load():
		err = ErrClosed
	case c.state.load() == ctxDeleting:
		err = fmt.Errorf("%w: %q is already being deleted", ErrContextDeleted, c.name)
	case c.state.load().gone():
		err = fmt.Errorf("%w: %q was already deleted", ErrContextDeleted, c.name)
	case len(c.children) > 0:
		err = fmt.Errorf("%w: %q has sub-contexts (%s); delete them first", ErrBadContext, c.name, names(c.children))
	default:
		err = c.checkInheritorLocked(inheritor)
	}
	if err != nil {
		s.cx.mu.Unlock()
		return fmt.Errorf("deleting %q: %w", c.name, err)
	}
	c.state.store(ctxDeleting)
	if inheritor != nil {
		c.inheritor = inheritor
	}
	s.cx.mu.Unlock()
	c.settle()
	c.lendForDelete()
	return nil
}

// heirLocked returns the context that gets c's workers when c is
// finished or deleted: its inheritor, or its parent if it has none (or
// the nearest ancestor not deleted, if it is gone). s.cx.mu is held.
func (c *Context) heirLocked() *Context {
	in := c.inheritor
	if in == nil || in.state.load().gone() {
		in = c.parent
		for in.state.load().gone() {
			in = in.parent
		}
	}
	return in
}

// lendForDelete gives c, being deleted, the workers its pending tasks
// need and it lacks (see Delete): free workers of its heir, then of its
// parent. Without them, a context deleted while it had tasks and no
// workers (or too few for a team) would never be deleted before Close.
func (c *Context) lendForDelete() {
	need := c.MinWorkers() // takes teamMu: before cx.mu, a leaf lock
	if need == 0 {
		return
	}
	s := c.s
	s.cx.mu.Lock()
	if c.state.load() != ctxDeleting {
		s.cx.mu.Unlock()
		return // its last task completed meanwhile
	}
	// A team runs on CPU workers only; a task of one worker on any.
	fits := func(id int) bool { return need == 1 || s.workers[id].info.Kind == CPUWorker }
	have := 0
	for id, l := range s.cx.target {
		if l.isIn(c) && fits(id) {
			have++
		}
	}
	var lend []int
	for _, from := range []*Context{c.heirLocked(), c.parent} {
		for id, l := range s.cx.target {
			if have+len(lend) < need && l == from && fits(id) && !slices.Contains(lend, id) {
				lend = append(lend, id)
			}
		}
	}
	moved := s.retargetLocked(lend, c, "delete")
	s.cx.mu.Unlock()
	if l := s.cfg.logger; l != nil && len(moved) > 0 {
		l.Info("context deleted with tasks and too few workers: lending it workers until they complete",
			zap.String("context", c.name), zap.Ints("workers", moved), zap.Int("needs", need))
	}
	s.wakeMoved(moved)
}

// settle ends a closing context once its last task is done: finishing
// becomes finished, deleting becomes deleted, and the context's own
// workers move to its inheritor. It is called after each transition to
// a closing state and when the pending count reaches zero; whichever
// comes last acts, once.
func (c *Context) settle() {
	if c.pending.n.Load() != 0 || !c.state.load().closing() {
		return
	}
	s := c.s
	s.cx.mu.Lock()
	st := c.state.load()
	if c.pending.n.Load() != 0 || !st.closing() {
		s.cx.mu.Unlock()
		return
	}
	in := c.heirLocked()
	var own []int
	for id, l := range s.cx.target {
		if l == c {
			own = append(own, id)
		}
	}
	reason := "finished"
	if st == ctxDeleting {
		reason = "delete"
	}
	moved := s.retargetLocked(own, in, reason)
	if st == ctxDeleting {
		c.state.store(ctxDeleted)
		p := c.parent
		p.children = slices.DeleteFunc(p.children, func(x *Context) bool { return x == c })
		s.cx.all = slices.DeleteFunc(s.cx.all, func(x *Context) bool { return x == c })
		s.cx.n.Add(-1)
		close(c.gone)
	} else {
		c.state.store(ctxFinished)
	}
	s.cx.mu.Unlock()
	s.wakeMoved(moved)
}
