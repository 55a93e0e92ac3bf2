package scheduler

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pzgo/pz/internal/spin"
)

// WorkerKind is the kind of processing unit a worker drives.
type WorkerKind uint8

const (
	// CPUWorker runs Codelet.CPU on one core.
	CPUWorker WorkerKind = iota
	// SimWorker drives a simulated accelerator (WithSimDevices): it runs
	// Codelet.CPU on the device's copies of the data.
	SimWorker
	// CUDAWorker drives a CUDA GPU (WithCUDA): it runs Codelet.CUDA on
	// the GPU's copies of the data.
	CUDAWorker
	numKinds
)

// String returns "cpu", "sim" or "cuda".
func (k WorkerKind) String() string {
	switch k {
	case CPUWorker:
		return "cpu"
	case SimWorker:
		return "sim"
	case CUDAWorker:
		return "cuda"
	}
	return fmt.Sprintf("WorkerKind(%d)", uint8(k))
}

// WorkerInfo describes a worker to a policy.
type WorkerInfo struct {
	// ID is the worker's index in the scheduler, 0 <= ID < Workers().
	ID int
	// Kind is what the worker runs.
	Kind WorkerKind
	// Node is the memory node the worker computes from.
	Node MemoryNode
	// SMs is the number of a GPU's streaming multiprocessors the worker
	// runs on (WithCUDAPartitions); 0: all of them, shared with the
	// GPU's other workers (and for other kinds).
	SMs int
	// Linked is set for a worker that moves each task's data over a
	// link of its own as it runs the task (WithWorkerLinks):
	// PolicyConfig.Transfer is that link's cost, and the worker is busy
	// meanwhile.
	Linked bool
}

// Wake hints returned by Policy.Push.
const (
	// AnyWorker asks the scheduler to wake one sleeping worker, if any.
	AnyWorker = -1
	// NoWorker asks the scheduler to wake nobody (the pushing worker
	// will pop the task itself).
	NoWorker = -2
)

// A Policy decides which worker runs each ready task. It is a data
// structure without goroutines: the scheduler calls Push when a task
// becomes ready (from the submitting goroutine or from the worker that
// completed its last predecessor) and Pop from each worker looking for
// work, concurrently, so every method must be safe for concurrent use.
//
// AddWorkers and RemoveWorkers change the set of workers the policy may
// give tasks to; the scheduler calls them only while the workers
// concerned are at a safe point (not inside Pop). RemoveWorkers returns
// the tasks that were queued for the removed workers alone, which the
// scheduler pushes again; a task must never be lost or returned twice.
type Policy interface {
	// Name returns the policy's name.
	Name() string
	// AddWorkers lets the workers pop tasks from now on.
	AddWorkers(ws ...WorkerInfo)
	// RemoveWorkers stops giving tasks to the workers and returns the
	// tasks only they could have popped.
	RemoveWorkers(ids ...int) []*Task
	// Push queues a ready task. from is the id of the pushing worker,
	// or -1 for a goroutine outside the scheduler. It returns the id of
	// a worker to wake, AnyWorker or NoWorker.
	Push(t *Task, from int) int
	// Pop returns a task for worker w, or nil if there is none.
	Pop(w int) *Task
}

// PolicyConfig is what the scheduler gives a policy's constructor.
type PolicyConfig struct {
	// Seed seeds the random choices of the policy (random, ws ties).
	Seed uint64
	// Estimate predicts the execution time of t on a worker of kind k in
	// nanoseconds from the task's codelet's performance model; ok is
	// false if the model is missing or not calibrated for t's footprint.
	Estimate func(t *Task, k WorkerKind) (ns float64, ok bool)
	// Now returns the current time in nanoseconds on a monotonic clock.
	Now func() int64
	// Transfer predicts the time in nanoseconds to make the data t reads
	// valid on the memory node of worker w: 0 where the data are there,
	// and always without devices; +Inf where t's data cannot fit in that
	// node's memory at all (t never runs there). For a linked worker
	// (WorkerInfo.Linked) it is its link's cost of sending t's data and
	// receiving what t writes (WorkerLink).
	Transfer func(t *Task, w int) float64
	// Prefetch starts moving the data t reads to the memory node of
	// worker w. A policy that assigns a task to a worker's queue before
	// the worker pops it calls Prefetch just before queuing it, so that
	// the copies overlap the tasks ahead of it; it never blocks.
	Prefetch func(t *Task, w int)
	// Serving reports whether worker w runs tasks now or as soon as it
	// is free: false for a driven worker (WithDrivenWorkers) while its
	// program is away from the Driver calls that run tasks (Run,
	// RunOnce, WaitAll, Submit past its limit), where a task queued for
	// it waits for the program to come back. nil: every worker serves.
	Serving func(w int) bool
}

// policyFactories returns the built-in policies by name. It builds a new
// map on every call: there is no package-level registry to mutate.
func policyFactories() map[string]func(PolicyConfig) Policy {
	return map[string]func(PolicyConfig) Policy{
		"eager":  func(PolicyConfig) Policy { return newCentral("eager", false) },
		"prio":   func(PolicyConfig) Policy { return newCentral("prio", true) },
		"random": func(c PolicyConfig) Policy { return newQueues("random", pushRandom, stealNone, c.Seed) },
		"ws":     func(c PolicyConfig) Policy { return newQueues("ws", pushLocal, stealLargest, c.Seed) },
		"lws":    func(c PolicyConfig) Policy { return newQueues("lws", pushLocal, stealNeighbors, c.Seed) },
		"dmda":   func(c PolicyConfig) Policy { return newDMDA(c) },
	}
}

// Policies returns the names of the built-in policies, sorted.
func Policies() []string {
	var names []string
	for n := range policyFactories() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func lookupPolicy(name string) (func(PolicyConfig) Policy, error) {
	f, ok := policyFactories()[name]
	if !ok {
		return nil, fmt.Errorf("%w %q: valid policies are %s (option WithPolicy or PZ_SCHED)", ErrUnknownPolicy, name, strings.Join(Policies(), ", "))
	}
	return f, nil
}

// taskQueue is a queue of tasks sorted by decreasing priority, FIFO among
// equal priorities, guarded by its own mutex. A closed queue refuses
// pushes (its worker was removed).
type taskQueue struct {
	// word is the queue's spin lock (bit 0) and, above it, the number of
	// queued tasks, readable without the lock (len): unlock publishes
	// the count and releases the lock in one atomic store, one locked
	// instruction fewer per push and per pop than a lock and a counter
	// apart.
	word   atomic.Uint64
	buf    []queued
	head   int
	closed bool
}

// lock takes the queue's lock, spinning (then yielding) while another
// goroutine holds it.
func (q *taskQueue) lock() {
	for i := 0; ; i++ {
		if w := q.word.Load(); w&1 == 0 && q.word.CompareAndSwap(w, w|1) {
			return
		}
		if i < spin.Spins {
			spin.Pause()
		} else {
			runtime.Gosched()
		}
	}
}

// unlock releases the lock, publishing the number of queued tasks.
func (q *taskQueue) unlock() { q.word.Store(uint64(len(q.buf)-q.head) << 1) }

// len returns the number of queued tasks, without the lock.
func (q *taskQueue) len() int32 { return int32(q.word.Load() >> 1) }

// queued is a task in a taskQueue with what the queue looks at under its
// lock: the kinds of worker that can run it and its priority, read from
// the task by the pusher, in whose cache it is. A popping worker then
// touches only the task it takes, after the lock (the task's first touch
// on another core is a cache miss: 9% of a worker's time in an eager run
// of independent tasks, inside the lock that the submitter and the other
// workers wait for).
type queued struct {
	t     *Task
	kinds uint8 // bit k: a worker of kind k can run t (Task.CanRunOn)
	// unmodeled: t's codelet has no performance model, so no kind is
	// ever calibrated for it (dmda's fallback scan takes such a task
	// without touching it under the lock).
	unmodeled bool
	prio      int
}

// queuedOf returns t as a queue entry.
func queuedOf(t *Task) queued {
	var kinds uint8
	for k := range numKinds {
		if t.CanRunOn(k) {
			kinds |= 1 << k
		}
	}
	return queued{t: t, kinds: kinds, unmodeled: t.Codelet == nil || t.Codelet.Model == nil, prio: t.Priority}
}

func (e queued) runsOn(k WorkerKind) bool { return e.kinds&(1<<k) != 0 }

// queuedTasks returns the tasks of entries.
func queuedTasks(entries []queued) []*Task {
	out := make([]*Task, len(entries))
	for i, e := range entries {
		out[i] = e.t
	}
	return out
}

// push inserts t in priority order; false if the queue is closed.
func (q *taskQueue) push(t *Task, prio bool) bool {
	e := queuedOf(t)
	q.lock()
	if q.closed {
		q.unlock()
		return false
	}
	if !prio || q.head == len(q.buf) || q.buf[len(q.buf)-1].prio >= e.prio {
		q.buf = append(q.buf, e)
	} else {
		// Insert after the last task of priority >= t's.
		live := q.buf[q.head:]
		i := sort.Search(len(live), func(i int) bool { return live[i].prio < e.prio })
		q.buf = append(q.buf, queued{})
		copy(q.buf[q.head+i+1:], q.buf[q.head+i:])
		q.buf[q.head+i] = e
	}
	q.unlock()
	return true
}

// popFront removes the first task that a worker of kind k can run.
func (q *taskQueue) popFront(k WorkerKind) *Task {
	if q.len() == 0 {
		return nil
	}
	q.lock()
	defer q.unlock()
	for i := q.head; i < len(q.buf); i++ {
		if !q.buf[i].runsOn(k) {
			continue
		}
		t := q.buf[i].t
		if i == q.head {
			q.buf[i] = queued{}
			q.head++
		} else {
			copy(q.buf[i:], q.buf[i+1:])
			q.buf[len(q.buf)-1] = queued{}
			q.buf = q.buf[:len(q.buf)-1]
		}
		q.compact()
		return t
	}
	return nil
}

// popBack removes, for a thief of kind k, the newest of the tasks of
// the highest priority that a worker of kind k can run, as StarPU's
// prio deque does for a steal (it takes from the back of the highest
// priority's list). The queue is in priority order, highest first
// (push with prio): taking the last task it can run, as popBack did,
// stole the lowest-priority task first, so that under ws and lws the
// high-priority tasks of a busy worker's queue ran last.
func (q *taskQueue) popBack(k WorkerKind) *Task {
	if q.len() == 0 {
		return nil
	}
	q.lock()
	defer q.unlock()
	i := -1
	if q.head < len(q.buf) && q.buf[q.head].prio == q.buf[len(q.buf)-1].prio {
		// One priority (the usual case): the last task k can run, found
		// from the back.
		for j := len(q.buf) - 1; j >= q.head; j-- {
			if q.buf[j].runsOn(k) {
				i = j
				break
			}
		}
	} else {
		// The first task k can run has the highest priority it may
		// take; the last of that priority's run of tasks it can run.
		for j := q.head; j < len(q.buf); j++ {
			if !q.buf[j].runsOn(k) {
				continue
			}
			if i >= 0 && q.buf[j].prio != q.buf[i].prio {
				break
			}
			i = j
		}
	}
	if i >= 0 {
		t := q.buf[i].t
		copy(q.buf[i:], q.buf[i+1:])
		q.buf[len(q.buf)-1] = queued{}
		q.buf = q.buf[:len(q.buf)-1]
		q.compact()
		return t
	}
	return nil
}

func (q *taskQueue) compact() {
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	} else if q.head > 1024 && q.head > len(q.buf)/2 {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
}

// close refuses further pushes and returns the queued tasks.
func (q *taskQueue) close() []*Task {
	q.lock()
	defer q.unlock()
	q.closed = true
	out := queuedTasks(q.buf[q.head:])
	q.buf, q.head = nil, 0
	return out
}

// central is the eager and prio policies: one queue shared by all
// workers (FIFO for eager, by priority for prio).
type central struct {
	name    string
	prio    bool
	q       taskQueue
	mu      sync.Mutex
	kinds   atomic.Pointer[[]WorkerKind] // by worker id; numKinds = absent
	members atomic.Int32
}

func newCentral(name string, prio bool) *central {
	c := &central{name: name, prio: prio}
	c.kinds.Store(&[]WorkerKind{})
	return c
}

func (c *central) Name() string { return c.name }

func (c *central) AddWorkers(ws ...WorkerInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := append([]WorkerKind(nil), *c.kinds.Load()...)
	for _, w := range ws {
		for len(k) <= w.ID {
			k = append(k, numKinds)
		}
		if k[w.ID] == numKinds {
			c.members.Add(1)
		}
		k[w.ID] = w.Kind
	}
	c.kinds.Store(&k)
}

func (c *central) RemoveWorkers(ids ...int) []*Task {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := append([]WorkerKind(nil), *c.kinds.Load()...)
	for _, id := range ids {
		if id < len(k) && k[id] != numKinds {
			k[id] = numKinds
			c.members.Add(-1)
		}
	}
	c.kinds.Store(&k)
	if c.members.Load() == 0 {
		// Nobody left to pop: hand the queue back.
		return c.q.drain()
	}
	return nil
}

func (c *central) Push(t *Task, from int) int {
	c.q.push(t, c.prio)
	return AnyWorker
}

// inlinable: with the shared queue empty, the task would go to the
// first worker to pop, and w is looking for work now.
func (c *central) inlinable(t *Task, w int) bool {
	k := *c.kinds.Load()
	return w < len(k) && k[w] != numKinds && t.CanRunOn(k[w]) && c.q.len() == 0
}

func (c *central) Pop(w int) *Task {
	k := *c.kinds.Load()
	if w >= len(k) || k[w] == numKinds {
		return nil
	}
	return c.q.popFront(k[w])
}

var (
	_ Policy  = (*central)(nil)
	_ inliner = (*central)(nil)
	_ inliner = (*queues)(nil)
)

// cacheLine is the padding that keeps fields written by different
// goroutines on different cache lines (two 64-byte lines: adjacent-line
// prefetchers pair them).
const cacheLine = 128

// policyConfig is what context policies are built with.
func (s *Scheduler) policyConfig() PolicyConfig {
	return PolicyConfig{
		Seed:     uint64(time.Now().UnixNano()),
		Estimate: s.estimate,
		Now:      s.now,
		Transfer: s.transferCost,
		Prefetch: s.prefetch,
		Serving:  s.serving,
	}
}

func (s *Scheduler) serving(w int) bool {
	return w < 0 || w >= len(s.workers) || s.workers[w].serving.Load()
}

func (s *Scheduler) transferCost(t *Task, w int) float64 {
	if s.links != nil && w >= 0 && w < len(s.links) && s.links[w] != nil {
		return s.links[w].Cost(linkBytes(t, s.links[w]))
	}
	if s.data == nil || !t.deviceData() {
		return 0
	}
	return s.data.transferCost(t, s.workers[w].info.Node)
}

func (s *Scheduler) prefetch(t *Task, w int) {
	if s.data == nil || w < 0 || w >= len(s.workers) || !t.deviceData() {
		return
	}
	if n := s.workers[w].info.Node; n != RAM {
		s.data.prefetch(t, n)
	}
}
