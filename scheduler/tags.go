package scheduler

import (
	"context"
	"errors"
	"fmt"
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

// declareTag binds t's tag to t. A tag whose task completed may be
// reused by a new task; a tag whose task is pending may not.
func (s *Scheduler) declareTag(t *Task) {
	s.tagMu.Lock()
	defer s.tagMu.Unlock()
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

// addTagDep makes t wait for the task with tag g, submitted or not.
func (s *Scheduler) addTagDep(g Tag, t *Task) {
	s.tagMu.Lock()
	defer s.tagMu.Unlock()
	e := s.tagLocked(g)
	if e.done {
		if e.err != nil {
			t.cancel(e.err)
		}
		return
	}
	e.succs = append(e.succs, t)
	t.pending.Add(1)
}

// tagDone completes t's tag and appends the released tasks to q.
func (s *Scheduler) tagDone(t *Task, err error, q []*Task) []*Task {
	s.tagMu.Lock()
	e := s.tags[t.Tag]
	if e == nil || e.task != t {
		s.tagMu.Unlock()
		return q
	}
	e.done, e.err = true, err
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

// WaitTag blocks until the tasks carrying the given tags have completed
// (tags not yet submitted are waited for) or ctx ends, and returns their
// errors joined.
func (s *Scheduler) WaitTag(ctx context.Context, tags ...Tag) error {
	var errs []error
	for _, g := range tags {
		s.tagMu.Lock()
		e := s.tagLocked(g)
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
		select {
		case <-ch:
			s.tagMu.Lock()
			if e.err != nil {
				errs = append(errs, e.err)
			}
			s.tagMu.Unlock()
		case <-ctx.Done():
			return fmt.Errorf("scheduler: waiting for tag %d: %w", g, ctx.Err())
		}
	}
	return errors.Join(errs...)
}
