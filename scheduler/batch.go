package scheduler

import (
	"context"
	"fmt"
	"sync"
)

// A Batch submits a group of tasks that start together. Its Submit and
// SubmitTask do what the Scheduler's do - validate the task, wire it
// after everything submitted before it, by this goroutine or any other,
// count it in flight - except that the task is held: none of a batch's
// tasks is handed to a worker until Flush. The dependencies are those of
// the same calls made one by one, so a graph written for Submit runs
// unchanged through a Batch.
//
// What it buys: while its tasks are held the submitter wires the graph
// in memory no worker touches, and the workers then run it with the
// cache lines of the tasks the submitter wrote. Fine-grained graphs
// whose tasks run about as long as a submission costs (a tiled algorithm
// on small tiles, a chain of tiny updates) submit faster this way;
// `pzrun bench tasks -batch N` measures it (docs/performance.md). A graph
// built whole before it runs (Taskflow's way) is a Batch flushed once.
//
// Nothing waits on a batch forever: Flush starts its tasks; WaitAll,
// Context.WaitAll, Driver.WaitAll and Close flush every batch holding
// tasks when they start, and so does Task.Wait (also Submit's with
// Synchronous, a Driver's too, and Unregister's) for a task held, or
// wired after a task held (through data, After or AfterTags), and
// WaitTag (a select on Task.Done does not: it waits for the Flush). A task
// a batch takes after a WaitAll or a Wait has started waits for the
// next Flush (one taken while Close runs starts at once: nothing could
// flush it any more). A Synchronous task cannot be held (it would
// wait for itself): Submit refuses it with ErrBadOption.
//
// A Batch may be used again after Flush, and from several goroutines
// (the tasks of concurrent Submits are ordered as the calls are). Make
// one with Scheduler.NewBatch: a zero Batch (or a nil *Batch) belongs to
// no scheduler, and its Submit and SubmitTask fail with ErrBadOption.
type Batch struct {
	s    *Scheduler
	mu   sync.Mutex
	held []*Task // in submission order
}

// NewBatch returns an empty batch of s.
func (s *Scheduler) NewBatch() *Batch { return &Batch{s: s} }

// Submit creates a task of cl with the given accesses and options and
// submits it held (see Batch and Scheduler.Submit).
func (b *Batch) Submit(ctx context.Context, cl *Codelet, args ...Arg) error {
	if b == nil || b.s == nil {
		return b.unmade("Submit", cl.name())
	}
	t := b.s.newTask(cl, args)
	err := b.s.submitHeld(ctx, t, nil, b)
	if err != nil {
		b.s.discard(t)
	}
	return err
}

// SubmitTask submits t held (see Batch and Scheduler.SubmitTask).
func (b *Batch) SubmitTask(ctx context.Context, t *Task) error {
	if b == nil || b.s == nil {
		name := "<nil task>"
		if t != nil {
			name = t.Codelet.name()
		}
		return b.unmade("SubmitTask", name)
	}
	return b.s.submitHeld(ctx, t, nil, b)
}

// unmade is the refusal of a submission of a task of codelet name to a
// nil or zero Batch, which belongs to no scheduler.
func (b *Batch) unmade(op, name string) error {
	what := "a zero Batch"
	if b == nil {
		what = "a nil *Batch"
	}
	return fmt.Errorf("%w: Batch.%s of %q to %s, which belongs to no scheduler: make batches with Scheduler.NewBatch", ErrBadOption, op, name, what)
}

// Len reports how many tasks b holds.
func (b *Batch) Len() int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.held)
}

// hold adds t, submitted and wired with its submission's count still in
// t.pending, to b.
func (b *Batch) hold(t *Task) {
	t.batch.Store(b)
	b.mu.Lock()
	if len(b.held) == 0 {
		b.s.batchMu.Lock()
		if b.s.batches == nil {
			b.s.batches = make(map[*Batch]struct{})
		}
		b.s.batches[b] = struct{}{}
		b.s.batchMu.Unlock()
	}
	b.held = append(b.held, t)
	b.mu.Unlock()
	if b.s.closed.Load() {
		// Close has started: it waits for t (counted before its closed
		// check) and may have flushed the batches already, so that
		// nothing but this would start t. Either Close's flush, after it
		// set closed, finds b registered above, or this sees closed.
		b.Flush()
	}
}

// Flush starts b's tasks: each goes on to the policy, in the order it
// was submitted, as soon as its predecessors are done (at once for those
// that wait for nothing). It does not wait for them.
func (b *Batch) Flush() {
	if b == nil {
		return // holds nothing (its Submit refuses every task)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.held) == 0 {
		return
	}
	for i, t := range b.held {
		b.held[i] = nil
		t.batch.Store(nil)
		// t may run, complete and (from the pool) be reused from here:
		// it is not touched again.
		if t.pending.Add(-1) == 0 {
			b.s.ready(t, nil)
		}
	}
	b.held = b.held[:0]
	b.s.batchMu.Lock()
	delete(b.s.batches, b)
	b.s.batchMu.Unlock()
}

// flushBatches flushes every batch holding tasks (see Batch).
func (s *Scheduler) flushBatches() {
	s.batchMu.Lock()
	if len(s.batches) == 0 {
		s.batchMu.Unlock()
		return
	}
	bs := make([]*Batch, 0, len(s.batches))
	for b := range s.batches {
		bs = append(bs, b)
	}
	s.batchMu.Unlock()
	for _, b := range bs {
		b.Flush()
	}
}
