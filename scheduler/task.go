package scheduler

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// A CPUFunc is a codelet's implementation for CPU workers. It runs on a
// worker goroutine with the task's data available through c (see
// VectorOf, MatrixOf, ValueOf). It must not keep c after returning. A
// returned error or a panic fails the task.
type CPUFunc func(c *Call) error

// ParallelKind says how a parallel task (a task with a team of more than
// one worker, see WithTeam) calls its implementation.
type ParallelKind uint8

const (
	// SPMD calls the implementation on every team member at once, each
	// told its rank and the team size through Call.Rank and Call.Size.
	SPMD ParallelKind = iota
	// ForkJoin calls the implementation once, on the team's rank 0, with
	// Call.Size set; the other members are reserved (idle) meanwhile, so
	// the implementation may start Size goroutines of its own.
	ForkJoin
)

// A Codelet describes a kind of task: its implementations per worker
// kind, its performance model and its flop count. A Codelet is read-only
// once used and may be shared by any number of tasks and schedulers.
type Codelet struct {
	// Name identifies the codelet in errors, traces and statistics.
	Name string
	// CPU is the implementation for CPU workers (and simulated devices),
	// or nil.
	CPU CPUFunc
	// CUDA is the implementation for CUDA GPU workers (WithCUDA), or nil:
	// it queues the task's work on the call's stream and returns (see
	// CUDAFunc). A codelet with only a CUDA implementation runs on GPUs
	// only.
	CUDA CUDAFunc
	// Model, when non-nil, is calibrated from every run of the codelet
	// and used by the dmda policy to predict execution times.
	Model *PerfModel
	// Flops, when non-nil, returns the floating-point operations of one
	// task; it is summed into the per-worker statistics.
	Flops func(t *Task) float64
	// Parallel says how a task with a team of several workers calls the
	// implementation; ignored for sequential tasks.
	Parallel ParallelKind
	// Detached, when non-nil, makes the codelet's tasks run no code on a
	// worker: once a task's dependencies are met, Detached is called with
	// the task and a done function, on whichever goroutine released the
	// task, and must not block. The task completes - its accesses
	// released, its successors freed - when done is called, once, from any
	// goroutine; until then later conflicting accesses to its data wait.
	// It is how work that happens elsewhere holds data without a worker
	// waiting for it (StarPU's starpu_data_acquire_cb): scheduler/dist
	// keeps a handle readable while it is sent, writable while it is
	// received. A detached task needs no CPU implementation. Detached may
	// use t only until it calls done: a task made by Submit (one with
	// OnDone callbacks too, as every task scheduler/dist submits) is
	// reused once it has completed, possibly before done returns; read
	// what is needed afterwards (t.Arg, t.Access) before calling done.
	// A panic in Detached fails the task as an error passed to done
	// would; one after done cannot fail the completed task, and is
	// reported by the scheduler's WaitAll instead.
	Detached func(t *Task, done func(err error))
}

func (cl *Codelet) name() string {
	if cl == nil || cl.Name == "" {
		return "<unnamed>"
	}
	return cl.Name
}

// Mode is the way a task accesses a data handle.
type Mode uint8

// Access modes. Combine only as W|Commute or RW|Commute.
const (
	// ModeR reads the handle.
	ModeR Mode = 1 << iota
	// ModeW writes the handle without reading it.
	ModeW
	// ModeScratch gives the task a private, uninitialized buffer of the
	// handle's shape, reused across tasks on the same worker; it creates
	// no dependency. On a device's worker (a simulated device or a GPU)
	// it is device memory, counted in the memory node's use like the
	// task's data, that goes back to the node's cache for reuse when the
	// task ends.
	ModeScratch
	// ModeRedux gives the task a private per-worker copy, initialized by
	// the handle's reduction init codelet, into which it accumulates;
	// the copies are combined into the handle before the next non-Redux
	// access (see Handle.SetReduction). Redux tasks run concurrently.
	ModeRedux
	// ModeCommute, combined with W or RW, lets the consecutive commuting
	// writers of a handle run in any order, one at a time.
	ModeCommute
	// ModeRW reads and writes the handle.
	ModeRW = ModeR | ModeW
)

// String returns the mode's name as used in errors and traces.
func (m Mode) String() string {
	switch m {
	case ModeR:
		return "R"
	case ModeW:
		return "W"
	case ModeRW:
		return "RW"
	case ModeScratch:
		return "Scratch"
	case ModeRedux:
		return "Redux"
	case ModeW | ModeCommute:
		return "W|Commute"
	case ModeRW | ModeCommute:
		return "RW|Commute"
	}
	return fmt.Sprintf("Mode(%#x)", uint8(m))
}

func (m Mode) valid() bool {
	switch m {
	case ModeR, ModeW, ModeRW, ModeScratch, ModeRedux, ModeW | ModeCommute, ModeRW | ModeCommute:
		return true
	}
	return false
}

// An Access is one data access of a task: a handle and a mode.
type Access struct {
	Handle *Handle
	Mode   Mode
}

// An Arg is an argument of Submit and NewTask: a data access (R, W, RW,
// Scratch, Redux, Commute, Data) or a task option (WithPriority,
// WithTag, After, AfterTags, WithArg, WithCallback, WithTeam,
// Synchronous, CancelOn). It is a small value type, so passing accesses
// costs no allocation.
type Arg struct {
	kind  argKind
	mode  Mode
	h     *Handle
	n     int
	v     any // WithArg's value, AfterTags' []Tag, WithCallback's func, ...
	tasks []*Task
}

type argKind uint8

const (
	argNone argKind = iota
	argAccess
	argPriority
	argTag
	argAfter
	argAfterTags
	argValue
	argCallback
	argDone
	argTeam
	argSync
	argContext
	argCancel
)

// Data returns an access to h in mode m.
func Data(h *Handle, m Mode) Arg { return Arg{kind: argAccess, h: h, mode: m} }

// R returns a read access to h.
func R(h *Handle) Arg { return Arg{kind: argAccess, h: h, mode: ModeR} }

// W returns a write-only access to h: the task overwrites it entirely.
func W(h *Handle) Arg { return Arg{kind: argAccess, h: h, mode: ModeW} }

// RW returns a read-write access to h.
func RW(h *Handle) Arg { return Arg{kind: argAccess, h: h, mode: ModeRW} }

// Scratch returns a scratch access to h (see ModeScratch).
func Scratch(h *Handle) Arg { return Arg{kind: argAccess, h: h, mode: ModeScratch} }

// Redux returns a reduction access to h (see ModeRedux).
func Redux(h *Handle) Arg { return Arg{kind: argAccess, h: h, mode: ModeRedux} }

// Commute returns a commuting read-write access to h (see ModeCommute).
func Commute(h *Handle) Arg { return Arg{kind: argAccess, h: h, mode: ModeRW | ModeCommute} }

// Tag names a task so that other tasks can depend on it, and callers can
// wait for it, before or after it is submitted. Tag 0 means no tag. One
// pending task at a time carries a tag: once it has completed, another
// may carry it. Submit refuses (ErrBadData) a tag a pending task
// carries, a task waiting for its own tag, and a task whose tag the
// tasks it waits for wait for, through their own tags (a cycle).
type Tag uint64

// WithPriority sets the task's priority (higher runs earlier under the
// prio, ws, lws and dmda policies; default 0).
func WithPriority(p int) Arg { return Arg{kind: argPriority, n: p} }

// WithTag sets the task's tag (see Tag).
func WithTag(t Tag) Arg { return Arg{kind: argTag, n: int(t)} }

// After makes the task depend on the given tasks (explicit dependencies).
// Nil entries are ignored, so that After(prev) with no previous task
// adds no dependency. The tasks must be, or be submitted later to, the
// same scheduler: naming a task of another scheduler is refused at
// Submit (ErrBadData), and so is submitting elsewhere a task that a
// submitted task waits for.
func After(tasks ...*Task) Arg { return Arg{kind: argAfter, tasks: tasks} }

// AfterTags makes the task depend on the tasks with the given tags,
// including tasks submitted later. Tag 0 means no tag and adds no
// dependency, so that AfterTags(prev) works in a loop whose first task
// has none (as After(nil) does).
func AfterTags(tags ...Tag) Arg { return Arg{kind: argAfterTags, v: tags} }

// WithArg sets the task's argument, available to the implementation as
// Call.Arg (StarPU's cl_arg). In master/worker mode (dist.RunMaster) the
// argument of a task run on another rank crosses through the codec and
// arrives with the Go type given here; a named type must be registered
// on every rank (dist.Registry.RegisterArgTypes).
func WithArg(v any) Arg { return Arg{kind: argValue, v: v} }

// ArgValue returns the value of a WithArg and true, or nil and false for
// an Arg that another function made: a layer that forwards a task's
// options (dist's master/worker mode, which sends the argument to
// another rank) reads it there.
func (a Arg) ArgValue() (any, bool) {
	if a.kind != argValue {
		return nil, false
	}
	return a.v, true
}

// WithCallback sets a function called on the worker goroutine once the
// task has completed (successfully or not; see Task.Err), before tasks
// depending on it are released. It must not block on the scheduler. A
// task given several runs them all, in the order given (a layer such as
// scheduler/dist adds its own to the caller's).
func WithCallback(fn func(*Task)) Arg { return Arg{kind: argCallback, v: fn} }

// OnDone is WithCallback for a caller that needs only the task's
// outcome: fn gets the task's error (nil on success, as Task.Err)
// instead of the *Task. It runs as a callback of WithCallback does (in
// the order given among them), but since nothing can keep the task
// through it, a task Submit makes with OnDone callbacks only goes back
// to Submit's pool once they have returned: no allocation per task
// (scheduler/dist gives one to each task it submits). Such a task's
// code sees it only while it runs (Call.Task; a Detached function until
// it calls done), as for any task of Submit without callbacks.
func OnDone(fn func(err error)) Arg { return Arg{kind: argDone, v: fn} }

// WithTeam makes the task parallel: it runs on a team of k workers at
// once (see Codelet.Parallel). k must not exceed the CPU workers of the
// task's context when it is submitted (those in it and those moving
// there; for the global context, the scheduler's): Submit refuses a
// larger team with ErrBadTeam, also for an empty context, which keeps
// its other tasks until workers arrive. A context that shrinks below k
// after the submission parks the team until workers join it (see
// Context.MinWorkers). k of 0 or 1 is an ordinary task, on one worker;
// a negative k is refused with ErrBadTeam.
func WithTeam(k int) Arg { return Arg{kind: argTeam, n: k} }

// Synchronous makes Submit wait until the task completes and return its
// error. If Submit's context ends first, Submit returns at once with an
// error wrapping the context's and ErrTaskPending: the task was
// submitted and completes later (its callbacks run then); an error
// without ErrTaskPending means the task was refused, or completed with
// that error.
func Synchronous() Arg { return Arg{kind: argSync} }

// CancelOn makes the task cancelable by ctx: once ctx has ended, the task
// does not start. If it has not started by then, it completes without
// running, with an error wrapping ErrCanceled and context.Cause(ctx), and
// the tasks that need its result are canceled as after a failure; a task
// already running (or a detached task already handed to its Detached
// function) is not affected and completes as usual. Only the tasks
// submitted with ctx are canceled, whatever else the scheduler runs.
//
// The cancellation is seen when the task would start: when its
// dependencies are met, or when a worker takes it from its context's
// queue; ending ctx costs nothing more and wakes no worker. So WaitAll
// returns once the tasks running when ctx ended, and the canceled tasks'
// completions (immediate, on the next free worker), are done; a task
// queued in a context without workers is canceled when a worker comes.
// The check costs one channel poll per start of such a task. Given
// several times, the last one counts.
func CancelOn(ctx context.Context) Arg { return Arg{kind: argCancel, v: ctx} }

// Task states.
const (
	stateNew uint32 = iota
	stateSubmitted
	stateDone   // completed successfully
	stateFailed // completed with an error (failed or canceled)
)

// A Task is one execution of a codelet on data. Build one with NewTask,
// or fill the exported fields, and submit it with SubmitTask; or use
// Submit, which does both. The exported fields must not change after
// submission; the scheduler clears After when the task completes, so
// read After before submitting the task or once Wait or Done has
// returned (it is nil then). A Task is safe for concurrent use by Wait,
// Err and Done.
type Task struct {
	// Codelet is what the task runs.
	Codelet *Codelet
	// Access lists the data the task uses, in the order the
	// implementation sees them (Call index i is Access[i]).
	Access []Access
	// Arg is passed to the implementation as Call.Arg.
	Arg any
	// Priority orders ready tasks under priority-aware policies.
	Priority int
	// Tag, when non-zero, names the task (see Tag).
	Tag Tag
	// After lists explicit predecessors. The scheduler clears it when
	// the task completes (before Wait returns and Done is closed), so
	// that a chain of tasks each After the previous one does not keep
	// every earlier task reachable; reading it while the task is
	// pending races with that.
	After []*Task
	// AfterTags lists predecessors by tag (0 adds none).
	AfterTags []Tag
	// Callback runs after completion (see WithCallback).
	Callback func(*Task)
	// Team is the number of workers that run the task together; 0 or 1
	// for a sequential task.
	Team int
	// Context is the scheduling context the task is submitted to; nil
	// means the default of the submitting call's ctx (Within), else the
	// global context. Submission sets it to the context used, the global
	// one included, so that a task's code always finds its context in
	// Call.Task.Context (a failed submission leaves it as it was).
	Context *Context

	s *Scheduler
	// owner is the scheduler a task of NewTask belongs to from its first
	// SubmitTask, or from the first submission that names it in After,
	// whichever comes first: another scheduler refuses it (claim).
	owner   atomic.Pointer[Scheduler]
	pending atomic.Int32 // predecessors not done, +1 while submitting
	state   atomic.Uint32
	nedge   int32
	// predicted is dmda's prediction in ns, 0 if none.
	predicted float32
	// held is the part of dmda's load that t's transfers add on a
	// linked worker (WorkerLink), in ns: the worker moves t's data.
	held float32

	waited atomic.Bool
	// heldDep is set when t was wired after a task a Batch held (or
	// after one that was): Wait flushes the batches then (batch.go).
	heldDep atomic.Bool
	sync    bool
	// dupAccess is set by validate when t names a handle twice: wire
	// then merges the accesses per handle.
	dupAccess bool
	hasFoot   bool
	commute   bool // some access is ModeCommute
	redux     bool // some access is ModeRedux
	cpuOnly   bool // its data fit no device it was given to (redirectToCPU)
	internal  bool // a task of the data layer's own (gather): takes no data
	engine    bool // inserted by the engine (insertLocked): its cancellation is no user task's
	// afterWired is set once t's After edges are wired (wireAfter);
	// guarded by s.tagMu.
	afterWired bool
	// stop is the context of CancelOn, or nil: once it has ended, the
	// task does not start (stopErr).
	stop context.Context
	// wantMask marks the accesses whose replicas on wantNode the task
	// prefetched and still wants (dataLayer.prefetch).
	wantMask uint64
	wantNode MemoryNode
	pooled   bool                  // made by Submit, back to its pool when refs reaches 0
	batch    atomic.Pointer[Batch] // the batch holding t until its Flush (batch.go)
	refs     atomic.Int32          // references to a pooled task (hold, release)
	chDone   bool                  // doneCh closed; guarded by mu
	// inCallback is set, after err, before the callback runs, so that it
	// sees the task's outcome through Err.
	inCallback atomic.Bool

	// succs is a lock-free stack of the edges to the tasks waiting for
	// this one; finish seals it (sealed) and releases them.
	succs  atomic.Pointer[edge]
	err    error // written before state becomes done/failed
	mu     sync.Mutex
	depErr error // guarded by mu; read once pending reached zero
	doneCh chan struct{}
	edges  [2]edge // this task's first incoming edges

	id        uint64
	preds     []uint64 // dependency ids, recorded only when tracing
	footprint uint64

	// onDone is the task's callback of OnDone, which a pooled task may
	// have: it gets no *Task. With Callback too (set after apply), it
	// runs after it.
	onDone func(error)
	// spareAcc is the access array of a pooled task that outgrew
	// inlineAcc, kept for its next use (taskPool.put, apply).
	spareAcc []Access

	inlineAcc [4]Access
}

// storeUnpublished sets an atomic counter of a task that no other
// goroutine can reach yet with a plain store: an atomic store is a
// locked instruction on amd64, and whatever publishes the task (an edge
// pushed onto a predecessor, a handle's list under its lock, a queue)
// orders the store before any other goroutine's access.
func storeUnpublished(x *atomic.Int32, v int32) { *(*int32)(unsafe.Pointer(x)) = v }

// storeUnpublishedU is storeUnpublished for an atomic.Uint32.
func storeUnpublishedU(x *atomic.Uint32, v uint32) { *(*uint32)(unsafe.Pointer(x)) = v }

// An edge links a predecessor to a waiting task.
type edge struct {
	next *edge
	t    *Task
	weak bool // ordering only: the predecessor's failure does not cancel t
}

// newEdge returns an edge into t, from t's inline storage while it lasts.
func (t *Task) newEdge() *edge {
	if int(t.nedge) < len(t.edges) {
		e := &t.edges[t.nedge]
		t.nedge++
		e.t = t
		return e
	}
	return &edge{t: t}
}

// NewTask returns an unsubmitted task of cl with the given accesses and
// options.
func NewTask(cl *Codelet, args ...Arg) *Task {
	t := &Task{Codelet: cl}
	t.apply(args)
	return t
}

// apply sets t's fields from args and reports whether they let a task
// of Submit be pooled (see poolable, which it agrees with).
func (t *Task) apply(args []Arg) (poolable bool) {
	poolable = true
	for i := range args {
		a := &args[i]
		switch a.kind {
		case argAccess:
			if t.Access == nil {
				t.Access = t.inlineAcc[:0]
				if t.spareAcc != nil {
					t.Access, t.spareAcc = t.spareAcc, nil
				}
			}
			t.Access = append(t.Access, Access{a.h, a.mode})
		case argPriority:
			t.Priority = a.n
		case argTag:
			t.Tag = Tag(a.n)
			poolable = false
		case argAfter:
			t.After = append(t.After, a.tasks...)
		case argAfterTags:
			tags, _ := a.v.([]Tag)
			t.AfterTags = append(t.AfterTags, tags...)
		case argValue:
			t.Arg = a.v
		case argCallback:
			fn, _ := a.v.(func(*Task))
			if od := t.onDone; od != nil && fn != nil {
				// An OnDone callback came first: it runs first.
				t.onDone = nil
				t.Callback = func(t *Task) { od(t.Err()) }
			}
			if prev := t.Callback; prev != nil && fn != nil {
				t.Callback = func(t *Task) {
					prev(t)
					fn(t)
				}
			} else if fn != nil {
				t.Callback = fn
			}
			poolable = false
		case argDone:
			fn, _ := a.v.(func(error))
			switch prev := t.Callback; {
			case fn == nil:
			case prev != nil:
				// After a callback of WithCallback: the task is not
				// pooled anyway.
				t.Callback = func(t *Task) {
					prev(t)
					fn(t.Err())
				}
			case t.onDone != nil:
				od := t.onDone
				t.onDone = func(err error) {
					od(err)
					fn(err)
				}
			default:
				t.onDone = fn
			}
		case argTeam:
			t.Team = a.n
			if a.n > 1 {
				poolable = false
			}
		case argSync:
			t.sync = true
			poolable = false
		case argContext:
			t.Context, _ = a.v.(*Context)
		case argCancel:
			t.stop, _ = a.v.(context.Context)
		}
	}
	return poolable
}

// Err returns the task's error once it is done: nil on success, a
// *TaskError if it failed, an error wrapping ErrCanceled if a
// predecessor failed or its CancelOn context ended before it started.
// Before completion it returns nil.
func (t *Task) Err() error {
	if t.state.Load() < stateDone && !t.inCallback.Load() {
		return nil
	}
	return t.err
}

// Done returns a channel closed when the task has completed.
func (t *Task) Done() <-chan struct{} {
	// Announce the waiter before checking the state; finish stores the
	// state before checking for waiters, so one of us closes the channel.
	t.waited.Store(true)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.doneCh == nil {
		t.doneCh = make(chan struct{})
	}
	if !t.chDone && t.state.Load() >= stateDone {
		t.chDone = true
		close(t.doneCh)
	}
	return t.doneCh
}

// Wait blocks until the task completes or ctx is done, and returns the
// task's error (or ctx's, wrapping ErrTaskPending as well). A task held by a Batch, or wired after one
// that is (or was), first flushes every Batch holding tasks, so that
// Wait does not wait for a Flush.
func (t *Task) Wait(ctx context.Context) error {
	if t.state.Load() >= stateDone {
		return t.Err()
	}
	if s := t.owner.Load(); s != nil {
		if err := s.checkNotInTask(fmt.Sprintf("Wait for a task of codelet %q", t.Codelet.name())); err != nil {
			return err
		}
	}
	if b := t.batch.Load(); b != nil {
		b.Flush() // waiting for a held task starts it
	}
	if t.heldDep.Load() { // set by wiring, after t.s
		// t waits, through its data, After or tags, for tasks that a
		// batch holds (or held): waiting starts them, or a Synchronous
		// Submit or an Unregister after an unflushed batch on the same
		// handle would wait forever.
		t.s.flushBatches()
	}
	select {
	case <-t.Done():
		return t.Err()
	case <-ctx.Done():
		return fmt.Errorf("scheduler: waiting for task %q: %w (%w)", t.Codelet.name(), ctxErr(ctx), ErrTaskPending)
	}
}

// Name returns the task's codelet name.
func (t *Task) Name() string { return t.Codelet.name() }

// Footprint returns a hash of the shapes of the task's data, the key of
// performance models (tasks of one codelet with equal footprints are
// expected to take the same time).
func (t *Task) Footprint() uint64 {
	if t.hasFoot {
		return t.footprint
	}
	return footprint(t.Access)
}

// CanRunOn reports whether the task's codelet has an implementation for
// worker kind k.
func (t *Task) CanRunOn(k WorkerKind) bool {
	switch k {
	case CPUWorker:
		return t.Codelet.CPU != nil
	case SimWorker:
		return t.Codelet.CPU != nil && t.Team <= 1 && !t.cpuOnly && t.deviceData()
	case CUDAWorker:
		return t.Codelet.CUDA != nil && t.Team <= 1 && !t.cpuOnly && t.deviceData()
	}
	return false
}

// deviceData reports whether all of t's data can live on a device (a
// simulated one or a GPU): vectors and matrices of numbers. A Scratch
// buffer and a Redux copy are then the device worker's own memory.
func (t *Task) deviceData() bool {
	for _, a := range t.Access {
		if !a.Handle.dev {
			return false
		}
	}
	return true
}

func footprint(acc []Access) uint64 {
	// FNV-1a over each access's shape, like StarPU's crc32 of the data
	// interfaces' sizes.
	h := uint64(14695981039346656037)
	mix := func(v uint64) {
		for i := 0; i < 8; i++ {
			h ^= v & 0xff
			h *= 1099511628211
			v >>= 8
		}
	}
	for _, a := range acc {
		b := &a.Handle.ram
		mix(uint64(b.rows))
		mix(uint64(b.cols))
		mix(uint64(b.elemSize))
	}
	return h
}

// A Call is what an implementation receives: the task, the data as seen
// on the worker's memory node, and the worker's place in the team.
// It is valid only during the call.
type Call struct {
	// Task is the task being run.
	Task *Task
	// Worker is the id of the worker running this call.
	Worker int
	// Rank is this worker's rank in the team (0 for sequential tasks).
	Rank int
	// Size is the team size (1 for sequential tasks).
	Size int
	// Arg is the task's argument (Task.Arg).
	Arg any

	bufs []*buffer
	// modelTime is the time to record in the performance model instead
	// of the implementation's (SetModelTime); 0: its own.
	modelTime time.Duration
}

// Len returns the number of data buffers (the task's accesses).
func (c *Call) Len() int { return len(c.bufs) }

// Data returns buffer i: the slice of a vector or matrix handle (a
// matrix slice starts at element (0,0) and uses the handle's leading
// dimension), or the registered value of a value handle.
func (c *Call) Data(i int) any { return c.bufs[i].data }

// Dims returns the rows, columns and leading dimension of buffer i
// (a vector of n elements is n x 1 with leading dimension 1).
func (c *Call) Dims(i int) (rows, cols, ld int) {
	b := c.bufs[i]
	return b.rows, b.cols, b.ld
}

// VectorOf returns buffer i of c as a []T. It panics (failing the task)
// if the buffer does not hold a []T.
func VectorOf[T any](c *Call, i int) []T {
	v, ok := c.bufs[i].data.([]T)
	if !ok {
		panic(fmt.Sprintf("scheduler: buffer %d holds %T, not %T", i, c.bufs[i].data, v))
	}
	return v
}

// A Matrix is a row-major view of matrix data: element (i, j) is
// Data[i*Stride+j].
type Matrix[T any] struct {
	Data       []T
	Rows, Cols int
	Stride     int
}

// At returns element (i, j).
func (m Matrix[T]) At(i, j int) T { return m.Data[i*m.Stride+j] }

// Set sets element (i, j).
func (m Matrix[T]) Set(i, j int, v T) { m.Data[i*m.Stride+j] = v }

// MatrixOf returns buffer i of c as a Matrix[T]. It panics (failing the
// task) if the buffer does not hold T elements.
func MatrixOf[T any](c *Call, i int) Matrix[T] {
	b := c.bufs[i]
	v, ok := b.data.([]T)
	if !ok {
		panic(fmt.Sprintf("scheduler: buffer %d holds %T, not %T", i, b.data, v))
	}
	return Matrix[T]{Data: v, Rows: b.rows, Cols: b.cols, Stride: b.ld}
}

// ValueOf returns buffer i of c, the value of a value handle, as a T.
// It panics (failing the task) if the value is not a T.
func ValueOf[T any](c *Call, i int) T {
	v, ok := c.bufs[i].data.(T)
	if !ok {
		panic(fmt.Sprintf("scheduler: buffer %d holds %T, not %T", i, c.bufs[i].data, v))
	}
	return v
}
