package scheduler

import (
	"slices"
	"sync"
	"sync/atomic"
)

// clusterPolicy is the policy of a context without one (a cluster): one
// FIFO of tasks, popped only by the member with the lowest id, one task
// at a time (taskDone releases the next).
type clusterPolicy struct {
	q       taskQueue
	mu      sync.Mutex
	members []WorkerInfo
	mkind   atomic.Int32 // master's kind
	mid     atomic.Int32 // master's id, -1 for none
	running atomic.Bool  // a task of the cluster is running
}

func (p *clusterPolicy) Name() string { return "none" }

func (p *clusterPolicy) AddWorkers(ws ...WorkerInfo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range ws {
		if !slices.ContainsFunc(p.members, func(x WorkerInfo) bool { return x.ID == w.ID }) {
			p.members = append(p.members, w)
		}
	}
	p.elect()
}

func (p *clusterPolicy) RemoveWorkers(ids ...int) []*Task {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.members = slices.DeleteFunc(p.members, func(x WorkerInfo) bool { return slices.Contains(ids, x.ID) })
	p.elect()
	return nil // the queue is shared: the next master pops it
}

// elect makes the lowest id member the master; p.mu is held.
func (p *clusterPolicy) elect() {
	m := int32(-1)
	var k WorkerKind
	for _, w := range p.members {
		if m < 0 || int32(w.ID) < m {
			m, k = int32(w.ID), w.Kind
		}
	}
	p.mkind.Store(int32(k))
	p.mid.Store(m)
}

func (p *clusterPolicy) Push(t *Task, from int) int {
	p.q.push(t, true)
	if m := p.mid.Load(); m >= 0 {
		return int(m)
	}
	return NoWorker
}

func (p *clusterPolicy) Pop(w int) *Task {
	if int32(w) != p.mid.Load() || p.q.n.Load() == 0 || !p.running.CompareAndSwap(false, true) {
		return nil
	}
	t := p.q.popFront(WorkerKind(p.mkind.Load()))
	if t == nil {
		p.running.Store(false)
	}
	return t
}

var _ Policy = (*clusterPolicy)(nil)
