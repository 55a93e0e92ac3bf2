package scheduler

import "sync/atomic"

// clusterPolicy is the policy of a context without one (a cluster): one
// FIFO of tasks, popped only by the master, one task at a time (taskDone
// releases the next). The master is the member with the lowest id among
// the workers the cluster has been given, whether they have joined yet
// or not (electLocked): elected from the workers that have joined, the
// first to reach its safe point after NewContext would take the first
// tasks, and the cluster would run them on another worker than its
// first.
type clusterPolicy struct {
	q       taskQueue
	mkind   atomic.Int32 // master's kind
	mid     atomic.Int32 // master's id, -1 for none
	running atomic.Bool  // a task of the cluster is running
}

func (p *clusterPolicy) Name() string { return "none" }

// AddWorkers does nothing: the master is elected when workers are given
// to the cluster, not when they join it (electLocked).
func (p *clusterPolicy) AddWorkers(...WorkerInfo) {}

// RemoveWorkers hands nothing back: the queue is shared, and the next
// master pops it.
func (p *clusterPolicy) RemoveWorkers(...int) []*Task { return nil }

// setMaster makes worker id, of kind k, the master (-1: none).
func (p *clusterPolicy) setMaster(id int, k WorkerKind) {
	p.mkind.Store(int32(k))
	p.mid.Store(int32(id))
}

func (p *clusterPolicy) Push(t *Task, from int) int {
	p.q.push(t, true)
	if m := p.mid.Load(); m >= 0 {
		return int(m)
	}
	return NoWorker
}

// Pop gives the next task to the master only. A worker pops from the
// cluster once it has joined it, so the master pops nothing before then.
func (p *clusterPolicy) Pop(w int) *Task {
	if int32(w) != p.mid.Load() || p.q.len() == 0 || !p.running.CompareAndSwap(false, true) {
		return nil
	}
	t := p.q.popFront(WorkerKind(p.mkind.Load()))
	if t == nil {
		p.running.Store(false)
	}
	return t
}

// electLocked makes the lowest id worker given to cluster c (joined or
// moving there) its master; s.cx.mu is held. A cluster has no
// sub-contexts, so its workers are those whose target is c.
func (s *Scheduler) electLocked(c *Context) {
	p := c.policy.(*clusterPolicy)
	for id, l := range s.cx.target {
		if l == c {
			p.setMaster(id, s.workers[id].info.Kind)
			return
		}
	}
	p.setMaster(-1, CPUWorker)
}

var _ Policy = (*clusterPolicy)(nil)
