package scheduler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// tagEntry is the state of one tag: the task carrying it (once
// submitted), the tasks depending on it and the waiters.
type tagEntry struct {
	task  *Task
	done  bool
	err   error
	succs []*Task
	ch    chan struct{}
}

func (s *Scheduler) tagLocked(g Tag) *tagEntry {
	e := s.tags[g]
	if e == nil {
		e = &tagEntry{}
		s.tags[g] = e
	}
	return e
}

// declareTagLocked binds t's tag to t. A tag whose task completed may be
// reused by a new task; a tag whose task is pending may not.
// s.tagMu is held.
func (s *Scheduler) declareTagLocked(t *Task) {
	e := s.tagLocked(t.Tag)
	if e.task != nil && !e.done {
		t.fail(fmt.Errorf("%w: tag %d of task %q is already carried by a pending task %q; use distinct tags", ErrBadData, t.Tag, t.Codelet.name(), e.task.Codelet.name()))
		return
	}
	if e.done {
		e = &tagEntry{}
		s.tags[t.Tag] = e
	}
	e.task = t
}

// checkTags refuses, before t is submitted, a tag that a pending task
// carries and a wait that can never end: t waiting for its own tag, or
// for a tag whose pending task waits (through tags) for t's.
func (s *Scheduler) checkTags(t *Task) error {
	if t.Tag == 0 {
		return nil
	}
	s.tagMu.Lock()
	defer s.tagMu.Unlock()
	if e := s.tags[t.Tag]; e != nil && e.task != nil && !e.done {
		return fmt.Errorf("%w: tag %d of task %q is already carried by a pending task %q; use distinct tags, or wait for that task first", ErrBadData, t.Tag, t.Codelet.name(), e.task.Codelet.name())
	}
	return s.tagCycleLocked(t)
}

// tagCycleLocked reports a wait of t through tags that can never end:
// for its own tag, or for a tag whose pending task waits (through tags)
// for t's. s.tagMu is held.
func (s *Scheduler) tagCycleLocked(t *Task) error {
	if t.Tag == 0 || len(t.AfterTags) == 0 {
		return nil
	}
	name := t.Codelet.name()
	// A walk back through the pending tasks that carry the tags t
	// waits for, and the tags they wait for: reaching t's own tag is a
	// cycle. from[g] is the tag whose carrier waits for g.
	from := map[Tag]Tag{}
	queue := make([]Tag, 0, len(t.AfterTags))
	for _, g := range t.AfterTags {
		if _, ok := from[g]; !ok && g != 0 {
			from[g] = 0
			queue = append(queue, g)
		}
	}
	for len(queue) > 0 {
		g := queue[0]
		queue = queue[1:]
		if g == t.Tag {
			return fmt.Errorf("%w: task %q with tag %d %s: it would wait for itself forever", ErrBadData, name, t.Tag, s.tagPathLocked(t.Tag, from))
		}
		e := s.tags[g]
		if e == nil || e.task == nil || e.done {
			continue
		}
		for _, n := range e.task.AfterTags {
			if _, ok := from[n]; !ok && n != 0 {
				from[n] = g
				queue = append(queue, n)
			}
		}
	}
	return nil
}

// tagPathLocked describes the chain of waits checkTags found from the
// task carrying tag to itself. s.tagMu is held.
func (s *Scheduler) tagPathLocked(tag Tag, from map[Tag]Tag) string {
	var chain []Tag // the tags waited for, from the last back to t's
	for g := tag; ; {
		prev := from[g]
		if prev == 0 {
			break
		}
		chain = append(chain, prev)
		g = prev
		if len(chain) > len(from) {
			break
		}
	}
	if len(chain) == 0 {
		return fmt.Sprintf("waits for tag %d, its own", tag)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "waits for tag %d", chain[len(chain)-1])
	for i := len(chain) - 1; i >= 0; i-- {
		next := tag
		if i > 0 {
			next = chain[i-1]
		}
		fmt.Fprintf(&b, ", carried by task %q, which waits for tag %d", s.tags[chain[i]].task.Codelet.name(), next)
	}
	return b.String()
}

// addTagDepLocked makes t, being wired, wait for the task with tag g,
// submitted or not; it reports whether t waits, an edge the caller counts
// in t.pending (see pushEdge).
// s.tagMu is held.
func (s *Scheduler) addTagDepLocked(g Tag, t *Task) bool {
	e := s.tagLocked(g)
	if !e.done && e.task == nil && s.tagsEnded {
		// Close has ended the waits for tags no task carries: a task
		// wired after that waits for nothing that can come.
		e.done, e.err = true, noTagCarrier(g)
		if e.ch != nil {
			close(e.ch)
		}
	}
	if e.done {
		if e.err != nil {
			t.cancel(e.err)
		}
		return false
	}
	e.succs = append(e.succs, t)
	// The tag's task may be held by a Batch, now or when it is
	// submitted: t's Wait flushes the batches (Task.Wait), and so does
	// the Wait of a task wired after t (pushEdge).
	t.heldDep.Store(true)
	return true
}

// tagDone completes t's tag and appends the released tasks to q.
func (s *Scheduler) tagDone(t *Task, err error, q []*Task) []*Task {
	s.tagMu.Lock()
	e := s.tags[t.Tag]
	if e == nil || e.task != t {
		s.tagMu.Unlock()
		return q
	}
	// The entry stays, done, so that a task wired later after the tag
	// waits for nothing (or is canceled by err), until RemoveTags drops
	// it; the task itself is no longer needed, and not kept.
	e.done, e.err, e.task = true, err, nil
	succs := e.succs
	e.succs = nil
	if e.ch != nil {
		close(e.ch)
	}
	s.tagMu.Unlock()
	for _, st := range succs {
		if err != nil {
			st.cancel(err)
		}
		if st.pending.Add(-1) == 0 {
			q = append(q, st)
		}
	}
	return q
}

// RemoveTags forgets the given tags once their tasks have completed,
// as StarPU's starpu_tag_remove: the scheduler remembers every tag whose
// task completed (so that a task submitted later with AfterTags of it,
// or a WaitTag, does not wait), which costs memory for each distinct
// tag until it is removed. A program that takes a new tag for every join
// (a recursive task that waits for its children's tags, a stream of
// tagged tasks) removes them once nothing will wait for them any more:
// the continuation that waited for its children's tags removes those
// tags in its own code, say. A removed tag is unknown: a later AfterTags
// or WaitTag of it waits for a task that carries it anew.
//
// Tag 0 and tags unknown to s are ignored. A tag that a pending task
// carries, or that tasks or WaitTag calls wait for before any task
// carries it, is kept, and RemoveTags returns an error wrapping
// ErrBadData naming it (the others are removed all the same). It does
// not wait, and may be called from a task's code.
func (s *Scheduler) RemoveTags(tags ...Tag) error {
	var kept []string
	s.tagMu.Lock()
	for _, g := range tags {
		e := s.tags[g]
		if g == 0 || e == nil {
			continue
		}
		if !e.done {
			why := "no task carries it yet, and tasks or WaitTag wait for it"
			if e.task != nil {
				why = fmt.Sprintf("task %q, which carries it, has not completed", e.task.Codelet.name())
			}
			kept = append(kept, fmt.Sprintf("tag %d (%s)", g, why))
			continue
		}
		delete(s.tags, g)
	}
	s.tagMu.Unlock()
	if len(kept) > 0 {
		return fmt.Errorf("%w: RemoveTags kept %s: remove a tag once its task has completed", ErrBadData, strings.Join(kept, ", "))
	}
	return nil
}

// noTagCarrier is the error of a wait for tag g that Close ended.
func noTagCarrier(g Tag) error {
	return fmt.Errorf("%w: the scheduler closed, and no task carries tag %d", ErrNotSubmitted, g)
}

// WaitTag blocks until the tasks carrying the given tags have completed
// (tags not yet submitted are waited for) or ctx ends, and returns their
// errors joined. Tag 0 means no tag: there is nothing to wait for. Once
// Close has started nothing can be submitted any more: a wait for a tag
// that no task carries then ends with ErrNotSubmitted, naming the tag.
func (s *Scheduler) WaitTag(ctx context.Context, tags ...Tag) error {
	var errs []error
	for _, g := range tags {
		if g == 0 {
			continue
		}
		s.tagMu.Lock()
		e := s.tagLocked(g)
		if !e.done && e.task == nil && s.tagsEnded {
			e.done, e.err = true, noTagCarrier(g)
		}
		if e.done {
			if e.err != nil {
				errs = append(errs, e.err)
			}
			s.tagMu.Unlock()
			continue
		}
		if e.ch == nil {
			e.ch = make(chan struct{})
		}
		ch := e.ch
		s.tagMu.Unlock()
		if err := s.checkNotInTask(fmt.Sprintf("WaitTag(%d)", g)); err != nil {
			return err
		}
		// The tag's task, or one it waits for, may be held by a Batch:
		// waiting starts it (as Task.Wait does).
		s.flushBatches()
		select {
		case <-ch:
			s.tagMu.Lock()
			if e.err != nil {
				errs = append(errs, e.err)
			}
			s.tagMu.Unlock()
		case <-ctx.Done():
			// Say so when nothing carries the tag yet, as WaitAll's
			// deadline error does: only a submission can end this wait.
			s.tagMu.Lock()
			unsubmitted := !e.done && e.task == nil
			s.tagMu.Unlock()
			if unsubmitted {
				return fmt.Errorf("scheduler: waiting for tag %d: %w (%w: no submitted task carries tag %d; submit a task WithTag(%d))", g, ctx.Err(), ErrNotSubmitted, g, g)
			}
			return fmt.Errorf("scheduler: waiting for tag %d: %w", g, ctx.Err())
		}
	}
	return errors.Join(errs...)
}

// noteEarlyLocked remembers that a task waits for p, named in After
// before p was submitted (or before p's own After edges were wired), so
// that a wait that never ends names p (stuckError) and p's wiring looks
// for a cycle through it (wireAfter). Entries whose task has been
// submitted and wired since are dropped as the map grows. s.tagMu is
// held.
func (s *Scheduler) noteEarlyLocked(p *Task) {
	if s.early == nil {
		s.early = map[*Task]int{}
	}
	if len(s.early) >= 64 && len(s.early)&(len(s.early)-1) == 0 {
		for x := range s.early {
			if x.state.Load() != stateNew && (x.afterWired || len(x.After) == 0) {
				delete(s.early, x)
			}
		}
	}
	s.early[p]++
}

// stuckWaits describes the waits that keep tasks from ever running
// unless something else is submitted: tags that no submitted task
// carries, and tasks named in After that were never submitted (at most
// a few of each, then a count); with scope, only the waits of the tasks
// of scope and its descendants.
func (s *Scheduler) stuckWaits(scope *Context) []error {
	const most = 4
	in := func(t *Task) bool { return scope == nil || t.Context.isIn(scope) }
	s.tagMu.Lock()
	defer s.tagMu.Unlock()
	var errs []error
	more := 0
	for g, e := range s.tags {
		if e.task != nil || len(e.succs) == 0 {
			continue
		}
		var first *Task
		k := 0
		for _, st := range e.succs {
			if in(st) {
				if first == nil {
					first = st
				}
				k++
			}
		}
		if k == 0 {
			continue
		}
		if len(errs) == most {
			more++
			continue
		}
		who := fmt.Sprintf("task %q waits", first.Codelet.name())
		if k > 1 {
			who = fmt.Sprintf("task %q and %d more wait", first.Codelet.name(), k-1)
		}
		errs = append(errs, fmt.Errorf("%w: %s for tag %d, which no submitted task carries; submit a task WithTag(%d)", ErrNotSubmitted, who, g, g))
	}
	// Tasks never submitted are named by their codelet: those of one name
	// make one line (two of them named "nop" are not two alike lines),
	// in the order of the names.
	type never struct{ tasks, waiting int }
	byName := map[string]*never{}
	for p, k := range s.early {
		if p.state.Load() != stateNew {
			continue
		}
		if scope != nil {
			// The tasks waiting for p are on its successor stack.
			k = 0
			for e := p.succs.Load(); e != nil; e = e.next {
				if in(e.t) {
					k++
				}
			}
			if k == 0 {
				continue
			}
		}
		name := p.Codelet.name()
		if byName[name] == nil {
			byName[name] = &never{}
		}
		byName[name].tasks++
		byName[name].waiting += k
	}
	for i, name := range slices.Sorted(maps.Keys(byName)) {
		if i == most {
			more += len(byName) - most
			break
		}
		e := byName[name]
		who := "1 task waits"
		if e.waiting > 1 {
			who = fmt.Sprintf("%d tasks wait", e.waiting)
		}
		what := fmt.Sprintf("task %q, which was never submitted; submit it", name)
		if e.tasks > 1 {
			what = fmt.Sprintf("%d tasks %q, which were never submitted; submit them", e.tasks, name)
		}
		errs = append(errs, fmt.Errorf("%w: %s (After) for %s", ErrNotSubmitted, who, what))
	}
	if more > 0 {
		errs = append(errs, fmt.Errorf("%w: and %d more waits like these", ErrNotSubmitted, more))
	}
	return errs
}

// endStuckWaits cancels, at Close (no submission can come any more), the
// tasks that wait for a tag no submitted task carries and those that
// wait for a task never submitted: nothing could end their waits, and
// Close would wait for them forever. A task never submitted becomes
// failed with ErrNotSubmitted, without running.
func (s *Scheduler) endStuckWaits() {
	var ready []*Task
	release := func(st *Task, err error) {
		st.cancel(err)
		if st.pending.Add(-1) == 0 {
			ready = append(ready, st)
		}
	}
	s.tagMu.Lock()
	s.tagsEnded = true
	for g, e := range s.tags {
		if e.task != nil || e.done {
			continue
		}
		// The tasks after the tag are canceled, and its WaitTag calls
		// return.
		err := noTagCarrier(g)
		for _, st := range e.succs {
			release(st, err)
		}
		e.succs = nil
		e.done, e.err = true, err
		if e.ch != nil {
			close(e.ch)
		}
	}
	var never []*Task
	for p := range s.early {
		never = append(never, p)
	}
	clear(s.early)
	s.tagMu.Unlock()
	for _, p := range never {
		// One submitted meanwhile runs; one whose submission is
		// refused (ErrClosed) is failed by it (unsubmit).
		ready = s.failNeverSubmitted(p, ready)
	}
	for _, t := range ready {
		s.ready(t, nil)
	}
}

// failNeverSubmitted fails p, a task still never submitted once Close
// has ended the waits (endStuckWaits), with ErrNotSubmitted, without
// running: the tasks waiting for it are canceled, and those released
// appended to ready, which the caller readies (not under s.tagMu). A
// task submitted meanwhile is left alone.
func (s *Scheduler) failNeverSubmitted(p *Task, ready []*Task) []*Task {
	if !p.state.CompareAndSwap(stateNew, stateSubmitted) {
		return ready
	}
	err := fmt.Errorf("%w: task %q was never submitted before the scheduler closed", ErrNotSubmitted, p.Codelet.name())
	p.err = err
	p.state.Store(stateFailed)
	if p.waited.Load() {
		p.mu.Lock()
		if p.doneCh != nil && !p.chDone {
			p.chDone = true
			close(p.doneCh)
		}
		p.mu.Unlock()
	}
	for e := p.succs.Swap(sealed); e != nil; {
		st, next := e.t, e.next
		st.cancel(err)
		if st.pending.Add(-1) == 0 {
			ready = append(ready, st)
		}
		e = next
	}
	return ready
}

// unsubmit takes back the submission of t, refused after its state
// became submitted: t is new again. Once Close has ended the waits, a
// task waiting for t (an After edge pushed while t looked submitted)
// would wait forever, Close with it: t is failed as never submitted
// then instead.
func (s *Scheduler) unsubmit(t *Task) {
	t.state.Store(stateNew)
	if t.pooled {
		return
	}
	s.tagMu.Lock()
	var ready []*Task
	if s.tagsEnded && t.succs.Load() != nil {
		ready = s.failNeverSubmitted(t, nil)
	}
	s.tagMu.Unlock()
	for _, x := range ready {
		s.ready(x, nil)
	}
}

// checkAfter refuses, before t is submitted, a wait that can never end
// through After: t after itself, or after a task that waits (through
// After, transitively) for t. Only a task named in After before its own
// submission can close such a cycle, so the walk runs for those only.
// The tasks on it are the caller's (NewTask), never pooled, and their
// After lists do not change once submitted.
func (s *Scheduler) checkAfter(t *Task) error {
	s.tagMu.Lock()
	_, early := s.early[t]
	s.tagMu.Unlock()
	name := t.Codelet.name()
	for _, p := range t.After {
		if p == t {
			return fmt.Errorf("%w: task %q is in its own After list: it would wait for itself forever", ErrBadData, name)
		}
		if p != nil && !p.pooled && !s.claim(p) {
			return fmt.Errorf("%w: task %q waits (After) for task %q, which belongs to another scheduler: a task waits only for tasks of its own scheduler", ErrBadData, name, p.Codelet.name())
		}
	}
	if !early {
		return nil
	}
	s.tagMu.Lock()
	defer s.tagMu.Unlock()
	return s.afterCycleLocked(t)
}

// afterCycleLocked reports a wait of t through After that can never
// end: after a task that waits (through After, transitively) for t.
// s.tagMu is held.
func (s *Scheduler) afterCycleLocked(t *Task) error {
	name := t.Codelet.name()
	seen := map[*Task]*Task{} // task -> the task that waits for it, on the walk
	queue := []*Task{}
	for _, p := range t.After {
		if p != nil && seen[p] == nil {
			seen[p] = t
			queue = append(queue, p)
		}
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if st := p.state.Load(); st == stateNew || st >= stateDone {
			continue // not waiting yet (its After may change), or done
		}
		for _, q := range p.After {
			if q == t {
				// t waits for p ... which waits for t.
				chain := []string{fmt.Sprintf("%q", p.Codelet.name())}
				for x := seen[p]; x != t; x = seen[x] {
					chain = append(chain, fmt.Sprintf("%q", x.Codelet.name()))
				}
				slices.Reverse(chain)
				return fmt.Errorf("%w: task %q waits (After) for %s, which waits for it: a cycle that never runs", ErrBadData, name, strings.Join(chain, ", which waits for "))
			}
			if q != nil && seen[q] == nil {
				seen[q] = p
				queue = append(queue, q)
			}
		}
	}
	return nil
}
