// Package scheduler runs task graphs on every core of a node, in the
// manner of StarPU: the program registers its data as handles, submits
// tasks that access handles in declared modes, and the scheduler infers
// the dependencies from the order of submission and runs each task when
// its inputs are ready, on the worker a scheduling policy chooses.
//
//	s, err := scheduler.New(ctx, scheduler.WithPolicy("dmda")) // or PZ_SCHED=dmda, PZ_NCPU=8
//	if err != nil { ... }
//	defer s.Close()
//	a, err := s.RegisterMatrix(data, n, n)        // also RegisterVector, RegisterValue
//	tiles, err := a.Partition(scheduler.Blocks(b, b))
//	gemm := &scheduler.Codelet{Name: "gemm", CPU: gemmCPU, Model: scheduler.HistoryModel("gemm")}
//	err = s.Submit(ctx, gemm, scheduler.R(tiles[i][k]), scheduler.R(tiles[j][k]), scheduler.RW(tiles[i][j]))
//	err = s.WaitAll(ctx)
//
// # Data handles
//
// A Handle is registered data: a slice (RegisterVector), a row-major
// matrix with a leading dimension (RegisterMatrix, option LD) or any value
// (RegisterValue). Partition cuts a vector or matrix into tiles, handles
// on the same memory; Unpartition gathers them back. Unregister waits for
// the tasks using a handle and returns its data. Registering memory that
// overlaps a registered handle is an error (ErrOverlap), so one piece of
// memory is never reachable through two unrelated handles; a matrix with
// a leading dimension holds only its rows, so the tiles of one matrix
// may each be registered in place (RegisterMatrix with LD). The check
// spans every Scheduler of the process: in-process ranks share memory,
// and the same slice registered with two ranks' schedulers is refused
// with an error naming both handles. Close releases a scheduler's
// registrations.
//
// # Tasks and codelets
//
// A Codelet holds a task kind's implementation (CPU), a performance
// model and a flop count. A task's
// implementation receives a *Call: its data through VectorOf, MatrixOf and
// ValueOf (indexed like the task's accesses), its argument, and its rank
// and team size for parallel tasks. Submit takes accesses and options:
//
//	s.Submit(ctx, cl, scheduler.R(x), scheduler.RW(y),
//		scheduler.WithPriority(1), scheduler.WithTag(7), scheduler.After(t0),
//		scheduler.WithCallback(fn), scheduler.WithArg(alpha))
//
// NewTask and SubmitTask do the same in two steps and keep the *Task for
// Wait; Synchronous makes Submit wait. WaitAll waits for everything,
// WaitTag for tagged tasks (possibly not yet submitted). A Batch
// (NewBatch) submits tasks the same way but holds them until its Flush,
// so that a fine-grained graph is wired before any of it runs. A
// task's code must not wait for tasks (WaitAll, Wait, WaitTag, a
// Synchronous Submit, Unregister, Close): such a wait fails with
// ErrInTask instead of deadlocking. It may submit tasks: where OpenMP
// would write a taskwait, a task submits its children with new tags and
// a continuation AfterTags of them (Example_recursive), and the program
// waits outside the tasks; RemoveTags forgets tags no one will wait for,
// which the scheduler otherwise remembers.
//
// # Access modes and implicit dependencies
//
// For each handle, in submission order, accesses form groups of
// compatible ones: consecutive reads (R), consecutive commuting writes
// (Commute: run in any order, one at a time) and consecutive reductions
// (Redux: each worker accumulates into a private copy made by the init
// codelet of SetReduction; the copies are combined into the handle before
// the next other access). Each access depends on the group before its
// own, and any other write (W, RW) forms a group of its own: this gives
// read-after-write, write-after-read and write-after-write ordering
// while letting readers run together. Scratch gives a per-worker buffer
// and no dependency. NoImplicitDeps turns inference off for a handle.
//
// # Access modes on one handle
//
// A task may name one handle several times. R, W and RW combine freely
// (R+RW, RW+RW, R+W): the task depends on the handle as if it had the
// union of the modes, once, and each Call index sees the same buffer.
// Scratch, Redux and Commute may only be repeated with the same mode:
// Scratch, Redux or Commute together with any other mode on the same
// handle is refused with ErrInvalidMode, since the buffers they give
// (a worker's scratch or reduction copy, a commute token) cannot also be
// the handle's data.
//
// # Workers, drivers and policies
//
// Workers run tasks, one per core by default (WithWorkers, PZ_NCPU), each
// behind a driver: initialized once on the goroutine that runs it, then
// run one cycle at a time (take a task, run it), then deinitialized, as
// in StarPU. The scheduler starts a goroutine per worker, except for the
// last n of WithDrivenWorkers: those the program drives itself, from a
// goroutine locked to an OS thread of its choosing (the main thread, where
// a graphics or CUDA context lives), with Scheduler.Driver and the
// Driver's Run, or Init, RunOnce (at most one task a call) from its own
// loop, and Deinit. Idle
// workers spin briefly and then sleep until a task is pushed for them. A Policy (Push, Pop, AddWorkers, RemoveWorkers) decides where
// ready tasks go: eager (one FIFO), prio (one priority queue), random,
// ws (work stealing from the most loaded), lws (local work stealing from
// neighbours; the default) and dmda (earliest predicted finish time, from
// HistoryModel measurements per codelet, data footprint and worker kind;
// uncalibrated tasks fall back to a shared FIFO). A model entry is
// calibrated, and used, once it has 10 measurements.
// Models are saved at Close under WithPerfModelDir, PZ_PERFMODEL_DIR or
// os.UserCacheDir()/pz/perfmodels, one file per model and host, and
// loaded by later runs; Close reports the models it could not save and
// the model files it did not use because they were invalid (kept as
// they are).
//
// # Memory nodes, coherence and devices
//
// RAM is memory node 0; each accelerator is a node of its own with a
// worker that computes from it. Without devices every handle lives in
// RAM and the data layer costs nothing. WithSimDevices (PZ_NSIM) adds
// simulated accelerators - separate allocations, copy engines throttled
// to a bandwidth and latency, codelets' CPU implementations run on the
// device's copies - so that everything below runs, and is tested, on a
// machine without a GPU. Each handle then has a replica per node in MSI
// state (invalid, shared, modified): a task's data are made valid on
// its worker's node first, by asynchronous copies staged through RAM; a
// write invalidates the other replicas; when a device is full, the
// least-recently-used replicas no task uses are dropped, the only valid
// ones written back to RAM first (ErrDeviceMemory when a task's data
// cannot fit at all: the task goes to a CPU worker of its context if one
// may run it, else fails). dmda adds each worker's transfer time to its
// predicted finish and starts a placed task's inputs moving at once
// (PolicyConfig.Transfer, Prefetch). Data, Fetch, Unregister, WaitAll and
// Close bring the newest version back to RAM; the devices' copies stay
// valid but after Data, the host's read-write access (Fetch is its read
// access): call Data before writing a handle's memory on the host, or a
// task on a device computes from its older copy. Vectors and matrices of
// numbers move to devices; value handles stay on CPU workers. A Redux
// access on a device worker gets a private copy in the device's memory,
// which the reduction task (on a CPU worker) brings home and combines.
// Transfers counts the copies; the trace and the Gantt chart show them
// on tracks of their own.
//
// WithCUDA (PZ_NCUDA) makes CUDA GPUs memory nodes the same way, each
// with CUDAWorker workers (WithCUDAWorkers per GPU). A codelet's CUDA
// implementation (CUDAFunc) gets the task's buffers as device pointers
// (CUDACall.Ptr) and a stream of the worker's, queues its work there and
// returns; the task completes when an event after that work has, and
// meanwhile the worker takes its next tasks, up to WithCUDAPipeline in
// flight. A codelet with only a CUDA implementation runs on GPUs only.
// Without a driver there are no GPU workers, and no error. PinHost
// page-locks host memory so that its copies to and from the GPUs are
// asynchronous.
//
// # Parallel tasks
//
// WithTeam(k) runs a task on k workers at once: with Codelet.Parallel
// SPMD every member calls the implementation with its Rank and Size; with
// ForkJoin only rank 0 does, the others being reserved for it. A team
// forms from the workers that pop its context's tasks, one team at a time
// in the scheduler. If the context shrinks below k after the task was
// submitted, the team waits for workers without holding up the teams of
// other contexts, and its members waiting for mates are let go: WaitAll
// with a deadline reports it (ErrNoWorkers, naming the context and the
// team), adding workers runs it, and Close lends the context the workers
// it needs. Context.MinWorkers tells a resizer how many workers a
// context's pending teams need.
//
// # Failures
//
// A task whose implementation returns an error or panics fails with a
// *TaskError: its message is one line (task, codelet, worker, cause); a
// panic's stack stays in TaskError.Stack and in the trace. Tasks that
// need its result - R, RW, Redux or Commute accesses to a handle it
// wrote, After, AfterTags - are not run and fail with an error wrapping
// ErrCanceled that names the failed task; other tasks go on. A task that
// only writes the handle (W) starts a new version of it and runs: that is
// how a handle recovers, and the R and RW tasks after that W run
// normally. WaitAll returns each failure once, joined. Invalid
// submissions (after Close, no implementation for any worker, a task
// that no worker of its context can run, a handle unregistered or
// partitioned, an invalid access mode) return an error at once and change
// nothing.
//
// # Traces and statistics
//
// WithTrace(file) or PZ_TRACE=file makes Close write a Chrome trace JSON
// (open it in Perfetto: one track per worker, one slice per task with its
// dependencies as flows) and a Gantt chart SVG beside it (file with the
// extension .svg, which the trace's own name must not have). Stats
// returns per-worker task counts and busy, idle and overhead times,
// which add up to each worker's lifetime. WriteTrace and WriteGantt need
// WithStats or WithTrace; without, they return ErrNotRecording.
//
// # Cost
//
// A task costs about 0.2 µs from submission to completion without data,
// and a few hundred nanoseconds with data handles and implicit
// dependencies (BenchmarkTasks reports us/task and cpu-us/task), on
// cores that pass a cache line to each other in about 100 ns: a task
// handed from a submitter to a worker crosses cores a few times, and its
// cost grows with that latency. A task Submit makes without a callback
// of WithCallback (OnDone's are fine: they get the error, not the
// task), tag, synchronous wait or team comes from a pool (the workers
// hand the tasks they free back to the submitters in batches) and costs
// no allocation, also past 4 accesses (a pooled task keeps its access
// array); other tasks cost one (about 500 bytes). No lock
// is shared by all workers: the handles' lock (one per scheduler, as
// libgomp's dependences take one per team) is held by the submitter
// while a task's dependencies are computed, once for all its handles,
// successor lists are lock-free stacks, each worker queue has its own
// lock, and completions are counted per worker in batches. Busy and idle times are measured only on demand
// (WithStats), since each clock read costs about 35 ns.
//
// # Safe points
//
// A worker is at a safe point at the top of its loop, between two
// RunOnce calls: it holds no task and no lock. That is where a worker
// may change hands (Policy.AddWorkers and RemoveWorkers): Pop applies a
// context change posted for the worker before it looks for a task.
//
// # Scheduling contexts
//
// A Context (StarPU's sched_ctx) is a set of workers with its own policy
// to which tasks are submitted; contexts form a tree rooted at the global
// context (Global), which holds every worker and the tasks submitted to
// no context. NewContext creates one from workers (ContextWorkers) or a
// count (ContextSize) free in the parent, with ContextPolicy (any policy,
// or "none" for a cluster: its tasks run one at a time on its first
// worker, its other workers being left to the runtime the task starts);
// Context.NewContext nests. A task goes to a context by Task.Context or
// InContext, or by the call's ctx (Within, the Go form of
// starpu_sched_ctx_set_context); WaitAll with such a ctx, or
// Context.WaitAll, waits for that context's tasks only.
//
//	small, _ := s.NewContext("small", scheduler.ContextSize(2))
//	big, _ := s.NewContext("big", scheduler.ContextSize(6), scheduler.ContextPolicy("dmda"))
//	err = s.Submit(scheduler.Within(ctx, big), gemm, scheduler.R(a), scheduler.RW(c))
//	err = s.MoveWorkers(small, big, 1)
//	err = small.Delete(big) // its tasks finish, then its workers move to big
//
// AddWorkers, RemoveWorkers and MoveWorkers post the change to each
// worker, which applies it at its next safe point: a running task
// completes first, the tasks queued for a leaving worker alone go to the
// context's other workers, and a task is never lost, run twice or run by
// a worker outside its context (TestContextStress checks this under
// -race while workers move every millisecond). There is no lock per
// worker and every lock outside the policies is a leaf (no code holding
// one takes another; a policy nests its membership lock over its
// queues' locks, in that order only), so there is no lock order to
// invert. The one exception is the lock of the scheduler's handles,
// which submissions take to wire dependencies: the engine readies the
// tasks it inserts in the task flow (a reduction's combination, a
// partition's gather) with it held, so a policy's Push and a Monitor's
// TaskPushed of those tasks run under it, and data-layer and registry
// locks are taken under it; nothing holding any of those takes it. An empty context keeps its tasks
// until workers arrive; StopSubmission, FinishedSubmitting (workers move
// to the inheritor when the last task ends) and Delete (the same, then
// the context goes; a context deleted without the workers its tasks need
// is lent them) make Submit fail with ErrContextStopped. When WaitAll's
// ctx ends while a context holds tasks and no workers, the error wraps
// ErrNoWorkers and names it; Close lends such a context a worker, so that
// every task runs. Resizes lists every change, WithLogger logs it, and
// the trace and Gantt chart show each worker's context over time.
//
// # Monitoring
//
// SetMonitor installs a Monitor whose hooks see every task pushed, popped
// and executed and every idle cycle and idle end, with the context
// concerned: the counters of package hypervisor, which resizes contexts
// by policy. Without a monitor the hooks cost one atomic load per task.
package scheduler
