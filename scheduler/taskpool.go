package scheduler

import "sync"

// taskPool recycles the tasks of Submit. A task is made by a submitting
// goroutine and freed by the worker that ran it, so a sync.Pool alone
// pays its slow path both ways on every task: the worker's Put lands in
// its own P's cache and the submitter's Get steals it from there. The
// workers instead gather freed tasks in batches of their own (no
// synchronization) and hand each full batch over at once; a submitter
// takes tasks one by one from the batch at hand. Frees off a worker and
// batches beyond maxFullBatches go to a sync.Pool, which get falls back
// on when no full batch is at hand.
type taskPool struct {
	// mu guards cur, the batch submitters take tasks from (held for a
	// few instructions: taking a task, or swapping batches).
	mu  sync.Mutex
	cur []*Task

	// bmu guards the full batches handed over by workers and the empty
	// ones handed back for them to fill.
	bmu   sync.Mutex
	full  [][]*Task
	empty [][]*Task

	pool sync.Pool
}

const (
	// recycleBatch is the number of tasks a worker hands over at once.
	recycleBatch = 64
	// maxFullBatches bounds the tasks kept outside the sync.Pool (which
	// the garbage collector may empty): 64 batches of 64 tasks.
	maxFullBatches = 64
)

// get returns a zeroed task.
func (p *taskPool) get() *Task {
	p.mu.Lock()
	if len(p.cur) == 0 {
		p.refill()
	}
	if n := len(p.cur); n > 0 {
		t := p.cur[n-1]
		p.cur[n-1] = nil
		p.cur = p.cur[:n-1]
		p.mu.Unlock()
		return t
	}
	p.mu.Unlock()
	if t, ok := p.pool.Get().(*Task); ok {
		return t
	}
	return new(Task)
}

// refill swaps the empty batch at hand for a full one, if a worker has
// handed one over. p.mu is held.
func (p *taskPool) refill() {
	p.bmu.Lock()
	if n := len(p.full); n > 0 {
		if cap(p.cur) == recycleBatch {
			p.empty = append(p.empty, p.cur[:0])
		}
		p.cur = p.full[n-1]
		p.full[n-1] = nil
		p.full = p.full[:n-1]
	}
	p.bmu.Unlock()
}

// put zeroes t, which nothing refers to any more, and takes it back,
// freed by worker w (nil for another goroutine).
func (p *taskPool) put(t *Task, w *worker) {
	// An access array that outgrew the inline one is kept, cleared, for
	// the task's next use (apply): a task of many accesses allocates
	// none either.
	acc := t.Access
	*t = Task{}
	if cap(acc) > len(t.inlineAcc) {
		clear(acc[:cap(acc)])
		t.spareAcc = acc[:0]
	}
	if w == nil {
		p.pool.Put(t)
		return
	}
	if w.freed == nil {
		w.freed = p.emptyBatch()
	}
	w.freed = append(w.freed, t)
	if len(w.freed) == recycleBatch {
		w.freed = p.handOver(w.freed)
	}
}

// emptyBatch returns a batch to fill, one handed back if any.
func (p *taskPool) emptyBatch() []*Task {
	p.bmu.Lock()
	defer p.bmu.Unlock()
	return p.takeEmpty()
}

// takeEmpty is emptyBatch with p.bmu held.
func (p *taskPool) takeEmpty() []*Task {
	if n := len(p.empty); n > 0 {
		b := p.empty[n-1]
		p.empty[n-1] = nil
		p.empty = p.empty[:n-1]
		return b
	}
	return make([]*Task, 0, recycleBatch)
}

// handOver gives the submitters the full batch b and returns an empty
// one for the worker to fill next.
func (p *taskPool) handOver(b []*Task) []*Task {
	p.bmu.Lock()
	if len(p.full) < maxFullBatches {
		p.full = append(p.full, b)
		e := p.takeEmpty()
		p.bmu.Unlock()
		return e
	}
	p.bmu.Unlock()
	for i, t := range b {
		p.pool.Put(t)
		b[i] = nil
	}
	return b[:0]
}
