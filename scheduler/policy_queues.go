package scheduler

import (
	"sync"
	"sync/atomic"
)

// workerSet is an immutable snapshot of a per-worker-queue policy's
// workers; AddWorkers and RemoveWorkers publish a new one, so Push and
// Pop take no policy-wide lock.
type workerSet struct {
	q    []*taskQueue // by worker id; nil if the worker is not a member
	info []WorkerInfo // by worker id
	ids  []int        // members in id order
	pos  []int        // by worker id: index in ids
}

func (s *workerSet) has(id int) bool { return id >= 0 && id < len(s.q) && s.q[id] != nil }

// queueSet is the shared machinery of the per-worker-queue policies:
// membership, orphan tasks (pushed while no member could run them) and
// retries when a push hits a queue closed by RemoveWorkers.
type queueSet struct {
	mu      sync.Mutex // serializes AddWorkers, RemoveWorkers and orphan pushes
	set     atomic.Pointer[workerSet]
	orphans taskQueue
	// orphanHook, when set (tests only), runs when a push found no
	// member able to run its task, before the task is kept as an orphan.
	orphanHook func()
}

func (qs *queueSet) init() { qs.set.Store(&workerSet{}) }

func (qs *queueSet) add(ws []WorkerInfo) []*Task {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	old := qs.set.Load()
	n := len(old.q)
	for _, w := range ws {
		n = max(n, w.ID+1)
	}
	s := &workerSet{q: make([]*taskQueue, n), info: make([]WorkerInfo, n), pos: make([]int, n)}
	copy(s.q, old.q)
	copy(s.info, old.info)
	for _, w := range ws {
		if s.q[w.ID] == nil {
			s.q[w.ID] = &taskQueue{}
		}
		s.info[w.ID] = w
	}
	for id, q := range s.q {
		if q != nil {
			s.pos[id] = len(s.ids)
			s.ids = append(s.ids, id)
		}
	}
	qs.set.Store(s)
	// Tasks that waited for workers go back through Push.
	return qs.orphans.drain()
}

func (qs *queueSet) remove(ids []int) []*Task {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	old := qs.set.Load()
	s := &workerSet{q: append([]*taskQueue(nil), old.q...), info: old.info, pos: make([]int, len(old.q))}
	var out []*Task
	for _, id := range ids {
		if s.has(id) {
			out = append(out, s.q[id].close()...)
			s.q[id] = nil
		}
	}
	for id, q := range s.q {
		if q != nil {
			s.pos[id] = len(s.ids)
			s.ids = append(s.ids, id)
		}
	}
	qs.set.Store(s)
	return out
}

// pushOrphan keeps t until workers able to run it are added, and
// reports true, if the members are still those of seen, the set in which
// the caller found none; else the caller must choose again. The check
// and the push are made under qs.mu, which add holds while it publishes
// a new set and takes the orphans: an orphan is either taken by the next
// add or its pusher sees that add's set. (Pushing first and re-pushing
// every orphan when the set had changed lost the wake hints of the
// re-pushes: a worker that had just joined could sleep forever beside a
// task queued for it; dmda kept such an orphan for good.) The lock order
// qs.mu, then a queue's lock, is the one add and remove follow.
func (qs *queueSet) pushOrphan(t *Task, seen *workerSet) bool {
	if qs.orphanHook != nil {
		qs.orphanHook()
	}
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if qs.set.Load() != seen {
		return false
	}
	qs.orphans.push(t, true)
	return true
}

// drain returns the queued tasks and leaves the queue open. It never
// closes the queue, not even briefly: a push racing with it must not
// fail, since Push callers of an open queue drop its result.
func (q *taskQueue) drain() []*Task {
	q.lock()
	defer q.unlock()
	out := queuedTasks(q.buf[q.head:])
	q.buf, q.head = nil, 0
	return out
}

// pushChooser picks the worker whose queue gets t, or -1 if no member
// can run it.
type pushChooser func(p *queues, s *workerSet, t *Task, from int) int

// stealer finds a task for worker w in the other members' queues.
type stealer func(p *queues, s *workerSet, w int) *Task

// queues is the random, ws and lws policies: one priority queue per
// worker, a push rule and a steal rule.
type queues struct {
	queueSet
	name   string
	choose pushChooser
	steal  stealer
	// rr and rng are written by pushes: keep them off the line of set,
	// which every Pop reads.
	_   [cacheLine]byte
	rr  atomic.Uint64
	rng atomic.Uint64
	_   [cacheLine]byte
}

func newQueues(name string, choose pushChooser, steal stealer, seed uint64) *queues {
	p := &queues{name: name, choose: choose, steal: steal}
	p.init()
	p.rng.Store(seed | 1)
	return p
}

func (p *queues) Name() string { return p.name }

func (p *queues) AddWorkers(ws ...WorkerInfo) {
	for _, t := range p.add(ws) {
		p.Push(t, -1)
	}
}

func (p *queues) RemoveWorkers(ids ...int) []*Task { return p.remove(ids) }

func (p *queues) Push(t *Task, from int) int {
	for {
		s := p.set.Load()
		w := p.choose(p, s, t, from)
		if w < 0 {
			if p.pushOrphan(t, s) {
				return NoWorker
			}
			continue // the members changed: choose again
		}
		q := s.q[w]
		before := q.len()
		if q.push(t, true) {
			if w == from && before == 0 {
				// The pushing worker pops it next.
				return NoWorker
			}
			if w == from {
				return AnyWorker
			}
			return w
		}
	}
}

// inlinable: under the local push rule (ws, lws) a task made ready by
// worker w goes to w's queue, which w pops first: when that queue is
// empty, w would pop this task next.
func (p *queues) inlinable(t *Task, w int) bool {
	if p.name == "random" { // random places tasks at random: never keep one
		return false
	}
	s := p.set.Load()
	return s.has(w) && t.CanRunOn(s.info[w].Kind) && s.q[w].len() == 0
}

func (p *queues) Pop(w int) *Task {
	s := p.set.Load()
	if !s.has(w) {
		return nil
	}
	k := s.info[w].Kind
	if t := s.q[w].popFront(k); t != nil {
		return t
	}
	if t := p.steal(p, s, w); t != nil {
		return t
	}
	return nil
}

// next returns a pseudo-random number (xorshift64*, lock-free).
func (p *queues) next() uint64 {
	for {
		x := p.rng.Load()
		y := x
		y ^= y >> 12
		y ^= y << 25
		y ^= y >> 27
		if p.rng.CompareAndSwap(x, y) {
			return y * 2685821657736338717
		}
	}
}

// pushLocal queues on the pushing worker (locality: a successor runs
// where its predecessor's data is hot), else round-robin: the scan for
// a member that can run t starts at the next turn and visits every
// member once. (Taking a turn per member visited let concurrent pushes
// advance the counter in between, so that a scan could visit only the
// members that cannot run t - twice the GPU worker of a CPU worker and
// a GPU worker - and leave t an orphan for good: a task sent back from
// a full GPU to the CPU workers never ran.)
func pushLocal(p *queues, s *workerSet, t *Task, from int) int {
	if s.has(from) && t.CanRunOn(s.info[from].Kind) {
		return from
	}
	n := uint64(len(s.ids))
	start := p.rr.Add(1)
	for i := range n {
		w := s.ids[(start+i)%n]
		if t.CanRunOn(s.info[w].Kind) {
			return w
		}
	}
	return -1
}

// pushRandom queues on a uniformly random member.
func pushRandom(p *queues, s *workerSet, t *Task, from int) int {
	n := len(s.ids)
	if n == 0 {
		return -1
	}
	start := int(p.next() % uint64(n))
	for i := 0; i < n; i++ {
		w := s.ids[(start+i)%n]
		if t.CanRunOn(s.info[w].Kind) {
			return w
		}
	}
	return -1
}

func stealNone(*queues, *workerSet, int) *Task { return nil }

// stealNeighbors is lws: try the next workers in id order, so a worker
// steals from its neighbours first (StarPU's locality work stealing).
func stealNeighbors(p *queues, s *workerSet, w int) *Task {
	n := len(s.ids)
	k := s.info[w].Kind
	for i := 1; i < n; i++ {
		v := s.ids[(s.pos[w]+i)%n]
		if t := s.q[v].popBack(k); t != nil {
			return t
		}
	}
	return nil
}

// stealLargest is ws: steal from the member with the most queued tasks.
func stealLargest(p *queues, s *workerSet, w int) *Task {
	k := s.info[w].Kind
	for tries := 0; tries < 2; tries++ {
		best, bestN := -1, int32(0)
		for _, v := range s.ids {
			if v == w {
				continue
			}
			if n := s.q[v].len(); n > bestN {
				best, bestN = v, n
			}
		}
		if best < 0 {
			return nil
		}
		if t := s.q[best].popBack(k); t != nil {
			return t
		}
	}
	return nil
}

var _ Policy = (*queues)(nil)
