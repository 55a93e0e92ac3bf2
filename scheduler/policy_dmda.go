package scheduler

import (
	"math"
	"sync"
	"time"
)

// heftCand is one worker's figures for placing a task: when the worker
// becomes free, the transfer time of the task's data to it, and the
// predicted execution time, all in nanoseconds.
type heftCand struct {
	avail, xfer, exec float64
}

// earliestFinish is the HEFT placement rule (Topcuoglu, Hariri and Wu,
// "Performance-effective and low-complexity task scheduling for
// heterogeneous computing", IEEE TPDS 13(3), 2002), as StarPU's dmda
// applies it to ready tasks: choose the candidate minimizing
// avail + xfer + exec. Ties go to the lowest index. It returns -1 for no
// candidates.
func earliestFinish(c []heftCand) (best int, finish float64) {
	best = -1
	for i, x := range c {
		f := x.avail + x.xfer + x.exec
		if best < 0 || f < finish {
			best, finish = i, f
		}
	}
	return best, finish
}

// dmdaWorker is dmda's view of one worker's load.
type dmdaWorker struct {
	queued float64 // predicted ns of the tasks in its queue
	runEnd int64   // predicted end of its running task
}

// dmda is the deque-model data-aware policy: each calibrated task goes to
// the worker where it is predicted to finish first, counting the work
// already queued there and the data transfers (PolicyConfig.Transfer),
// and its inputs start moving there at once (PolicyConfig.Prefetch);
// tasks of uncalibrated
// codelets go to a shared FIFO that every worker pops (eager fallback),
// which also calibrates their models.
type dmda struct {
	queueSet
	cfg      PolicyConfig
	fallback taskQueue
	mu       sync.Mutex // guards load
	load     []dmdaWorker
}

func newDMDA(cfg PolicyConfig) *dmda {
	p := &dmda{cfg: cfg}
	p.init()
	return p
}

func (p *dmda) Name() string { return "dmda" }

func (p *dmda) AddWorkers(ws ...WorkerInfo) {
	// The loads grow before the workers are published (add): a Push
	// that sees a new worker indexes its load at once.
	n := 0
	for _, w := range ws {
		n = max(n, w.ID+1)
	}
	p.growLoads(n)
	orphans := p.add(ws)
	for _, t := range orphans {
		p.Push(t, -1)
	}
}

func (p *dmda) RemoveWorkers(ids ...int) []*Task {
	out := p.remove(ids)
	p.resetLoads(ids)
	if len(p.set.Load().ids) == 0 {
		out = append(out, p.fallback.drain()...)
	}
	return out
}

// growLoads makes room for the loads of workers 0 to n-1.
func (p *dmda) growLoads(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.load) < n {
		p.load = append(p.load, dmdaWorker{})
	}
}

// resetLoads forgets the loads of workers that left.
func (p *dmda) resetLoads(ids []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		if id >= 0 && id < len(p.load) {
			p.load[id] = dmdaWorker{}
		}
	}
}

func (p *dmda) Push(t *Task, from int) int {
	for {
		s := p.set.Load()
		if len(s.ids) == 0 {
			if p.pushOrphan(t, s) {
				return NoWorker
			}
			continue // workers were added meanwhile
		}
		if t.Codelet.Model == nil {
			// Never calibrated: the shared FIFO, without a look at
			// the workers (pushCalibrating reads lines they write).
			p.fallback.push(t, true)
			return AnyWorker
		}
		var buf [64]heftCand
		var who [64]int
		cands, ids := buf[:0], who[:0]
		calibrated := true
		for _, w := range s.ids {
			k := s.info[w].Kind
			if !t.CanRunOn(k) {
				continue
			}
			est, ok := p.cfg.Estimate(t, k)
			if !ok {
				calibrated = false
				break
			}
			var xfer float64
			if p.cfg.Transfer != nil {
				xfer = p.cfg.Transfer(t, w)
			}
			cands = append(cands, heftCand{exec: est, xfer: xfer})
			ids = append(ids, w)
		}
		if !calibrated || len(cands) == 0 {
			if w, ok := p.pushCalibrating(t, s); ok {
				return w
			}
			p.fallback.push(t, true)
			return AnyWorker
		}
		i := p.place(cands, ids, s.info)
		w := ids[i]
		t.predicted, t.held = float32(cands[i].exec), 0
		if s.info[w].Linked {
			t.held = float32(cands[i].xfer)
		}
		q := s.q[w]
		before := q.len()
		if p.cfg.Prefetch != nil {
			p.cfg.Prefetch(t, w) // before queuing: once queued, t may run and be gone
		}
		if q.push(t, true) {
			if w == from && before == 0 {
				return NoWorker
			}
			return w
		}
		p.unplace(w, cands[i].exec+float64(t.held))
	}
}

// place chooses, among the candidates cands (workers ids, described by
// info), the one where a task finishes first, counts the task's
// execution time in its load - and its transfers' for a linked worker,
// which moves the data itself - and returns its index. The lock of the
// loads is released by a defer, here and wherever dmda takes it: a
// panic under it (an index past the loads, the defect of
// TestDMDAPushWhileAddingWorkers) may be recovered - a Push inside a
// task runs under callCPU's recover - and the lock left held would
// block every worker and Close for ever.
func (p *dmda) place(cands []heftCand, ids []int, info []WorkerInfo) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	away := 0
	for i, w := range ids {
		l := p.load[w]
		cands[i].avail = float64(max(now, l.runEnd)-now) + l.queued
		if p.cfg.Serving != nil && !p.cfg.Serving(w) {
			// A driven worker whose program is away runs
			// nothing until it comes back: no time to count on.
			cands[i].avail = math.Inf(1)
			away++
		}
	}
	if away == len(ids) {
		for i, w := range ids {
			l := p.load[w]
			cands[i].avail = float64(max(now, l.runEnd)-now) + l.queued
		}
	}
	i, _ := earliestFinish(cands)
	add := cands[i].exec
	if info[ids[i]].Linked {
		add += cands[i].xfer
	}
	p.load[ids[i]].queued += add
	return i
}

// unplace takes back the time place counted for a task on worker w,
// whose queue then refused the task: w left meanwhile, and RemoveWorkers
// may have reset its load already, which must not go below zero (w,
// back, would look busy for less than nothing and take every task).
func (p *dmda) unplace(w int, exec float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := &p.load[w]
	l.queued = max(l.queued-exec, 0)
}

// popped counts the start of t, popped from worker w's queue: its time
// leaves the queued load and makes the predicted end of w's run.
func (p *dmda) popped(t *Task, w int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := &p.load[w]
	busy := float64(t.predicted) + float64(t.held)
	l.queued = max(l.queued-busy, 0)
	l.runEnd = p.cfg.Now() + int64(busy)
}

func (p *dmda) Pop(w int) *Task {
	s := p.set.Load()
	if !s.has(w) {
		return nil
	}
	if t := s.q[w].popFront(s.info[w].Kind); t != nil {
		p.popped(t, w)
		return t
	}
	return p.popFallback(s.info[w].Kind)
}

// calibQueued is how many tasks pushCalibrating queues for a worker at
// most: beyond, the shared FIFO keeps them for whichever worker is free.
const calibQueued = 1

// pushCalibrating queues t, which some kind of worker that may run it
// has not calibrated, for a worker of such a kind with fewer than
// calibQueued tasks queued (the fewest), as StarPU's dmda gives an
// uncalibrated task to a worker whose model it lacks; ok is false when
// there is none (t then goes to the shared FIFO). Through the FIFO alone
// a chain of tasks, each released by the end of the one before, went to
// the worker that ended it, which took it at once (inlinable): a device's
// worker, asleep meanwhile, never ran one, its kind was never
// calibrated, and dmda never placed the codelet's tasks, in that run or,
// with the models saved, in any later one.
//
// Only a task that some kind has calibrated is routed so: while no kind
// has, every worker takes its share from the FIFO (popFallback).
func (p *dmda) pushCalibrating(t *Task, s *workerSet) (int, bool) {
	some := false // a kind that may run t has calibrated it
	for _, w := range s.ids {
		if k := s.info[w].Kind; t.CanRunOn(k) {
			if _, ok := p.cfg.Estimate(t, k); ok {
				some = true
				break
			}
		}
	}
	if !some {
		// Every worker takes its share from the FIFO; the workers'
		// serving flags and queues, lines they write, are not read.
		return 0, false
	}
	best, bestLen := -1, int32(calibQueued)
	for _, w := range s.ids {
		k := s.info[w].Kind
		if !t.CanRunOn(k) {
			continue
		}
		if _, ok := p.cfg.Estimate(t, k); ok {
			continue
		}
		if p.cfg.Serving != nil && !p.cfg.Serving(w) {
			continue
		}
		if n := s.q[w].len(); n < bestLen {
			best, bestLen = w, n
		}
	}
	if best < 0 {
		return 0, false
	}
	if p.cfg.Prefetch != nil {
		p.cfg.Prefetch(t, best)
	}
	if !s.q[best].push(t, true) {
		return 0, false // the worker left: the FIFO keeps t
	}
	return best, true
}

// calibScan bounds the tasks popFallback looks through.
const calibScan = 16

// popFallback pops a task of the shared FIFO for a worker of kind k: the
// first, among those of the head's priority (up to calibScan), that k can
// run and is not calibrated for, else the first k can run. Every kind
// then calibrates the tasks it may run, as StarPU's dmda gives an
// uncalibrated task to a worker whose kind it must calibrate: taking the
// head, a device's worker that the program woke first for each pair of
// a small and a large task it submitted took the small one nearly every
// time, and the large one was never calibrated on the device, nor placed
// by the model. The FIFO holds only tasks that some kind lacks a model
// for, so the scan is short where it matters: a kind that must calibrate
// the head takes it at once.
func (p *dmda) popFallback(k WorkerKind) *Task {
	q := &p.fallback
	if q.len() == 0 {
		return nil
	}
	if t, scanned := p.popFallbackScan(k); scanned {
		return t
	}
	return q.popFront(k) // none k can run near the head
}

// popFallbackScan is popFallback's scan of the FIFO's head, under the
// FIFO's lock, released by a defer (Estimate runs under it); scanned is
// false when no task near the head is one k can run.
func (p *dmda) popFallbackScan(k WorkerKind) (t *Task, scanned bool) {
	q := &p.fallback
	q.lock()
	defer q.unlock()
	pick, first := -1, -1
	for i := q.head; i < len(q.buf) && i < q.head+calibScan; i++ {
		e := q.buf[i]
		if !e.runsOn(k) {
			continue
		}
		if first < 0 {
			first = i
		} else if e.prio != q.buf[first].prio {
			break
		}
		if e.unmodeled {
			pick = i // never calibrated; read from the entry, not the task (a cache miss under the lock)
			break
		}
		if _, ok := p.cfg.Estimate(e.t, k); !ok {
			pick = i
			break
		}
	}
	if pick < 0 {
		pick = first
	}
	if pick < 0 {
		return nil, false
	}
	t = q.buf[pick].t
	if pick == q.head {
		q.buf[pick] = queued{}
		q.head++
	} else {
		copy(q.buf[pick:], q.buf[pick+1:])
		q.buf[len(q.buf)-1] = queued{}
		q.buf = q.buf[:len(q.buf)-1]
	}
	q.compact()
	return t, true
}

// inlinable: a task Push would give the shared FIFO (a codelet not
// calibrated for a worker that can run it: the eager fallback) goes to
// the first worker to look, and w pops the FIFO when its own queue is
// empty: with both empty, w would pop this task next. A calibrated task
// is placed by the model: never kept. Nor is one that w's kind has
// calibrated while another kind that may run it has not: Push gives it
// to a worker of that kind (pushCalibrating).
func (p *dmda) inlinable(t *Task, w int) bool {
	s := p.set.Load()
	if !s.has(w) || !t.CanRunOn(s.info[w].Kind) || s.q[w].len() != 0 || p.fallback.len() != 0 {
		return false
	}
	if _, ok := p.cfg.Estimate(t, s.info[w].Kind); ok {
		return false
	}
	var seen [numKinds]bool
	for _, id := range s.ids {
		k := s.info[id].Kind
		if k >= numKinds || seen[k] || !t.CanRunOn(k) {
			continue
		}
		seen[k] = true
		if _, ok := p.cfg.Estimate(t, k); !ok {
			return true
		}
	}
	return false
}

// Predicted returns the execution time that the dmda policy predicted
// for t on the worker it placed t on: the mean time of t's codelet's
// history model for t's footprint on that worker's kind, which
// Scheduler.ModelEstimate also returns (StarPU's starpu_task.predicted).
// ok is false when no prediction was made: under another policy, for a
// codelet without a model, or while the model is not calibrated for
// every worker kind that may run t (dmda then queues t for any worker,
// which calibrates it); a prediction of 0 reads as none. Call it once t
// has been placed: in t's implementation (Call.Task), or once t has
// ended (Task.Wait); earlier, it races with the placement.
func (t *Task) Predicted() (d time.Duration, ok bool) {
	if !(t.predicted > 0) {
		return 0, false
	}
	return time.Duration(math.Round(float64(t.predicted))), true
}

var (
	_ Policy  = (*dmda)(nil)
	_ inliner = (*dmda)(nil)
)
