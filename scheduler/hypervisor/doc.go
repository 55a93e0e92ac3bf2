// Package hypervisor resizes scheduling contexts at run time, after
// StarPU's sc_hypervisor: it watches every context and worker of a
// scheduler through the scheduler.Monitor hooks (task pushed, popped,
// executed; idle cycles and idle ends), keeps counters (tasks, flops,
// busy and idle time, instant speeds over a sampling window) and, when a
// trigger fires, asks its policy which workers should move between the
// registered contexts.
//
//	s, _ := scheduler.New(ctx)
//	small, _ := s.NewContext("small", scheduler.ContextSize(n/2))
//	big, _ := s.NewContext("big", scheduler.ContextSize(n/2))
//	hv, _ := hypervisor.New(s, hypervisor.WithPolicyName("gflops_rate"))
//	defer hv.Close()
//	hv.Register(small, hypervisor.Limits{TotalFlops: fs})
//	hv.Register(big, hypervisor.Limits{TotalFlops: fb})
//
// # Policies
//
//   - app_driven (AppDriven): the application asks for a resize that
//     happens when the task with a given tag completes (OnTag).
//   - idle (Idle): a worker idle longer than its threshold moves to the
//     context with the most ready tasks per worker.
//   - gflops_rate (GflopsRate): contexts finish together; workers are
//     shared in proportion to the remaining declared flops divided by
//     each context's measured speed per worker.
//   - ispeed (ISpeed): per sampling window, a worker moves from the
//     context with the highest instant speed to the one with the lowest;
//     a context with no pending work gives its workers (beyond
//     Limits.Min) to those with work at the next decision.
//   - throughput (Throughput): a worker moves from the context where it
//     adds least speed to the one where it adds most (total speed up).
//   - feft (FEFT, StarPU's feft_lp): a linear program over the
//     contexts' remaining flops (Limits.TotalFlops, corrected during the
//     run with SetTotalFlops or AddTotalFlops) and the measured speed of
//     each kind of worker on each context predicts the distribution of
//     the workers with which all the contexts finish first (SolveFlops).
//   - teft (TEFT, StarPU's teft_lp): the same over every type of task
//     left (a codelet in a context), their counts and their times per
//     kind of worker, measured or from the scheduler's calibrated
//     models (SolveTasks); AnnounceTasks declares types before they are
//     submitted.
//
// feft and teft are solved with gonum's Simplex
// (gonum.org/v1/gonum/optimize/convex/lp) and rounded to whole workers:
// each worker is assigned exactly once and every context stays within
// its Limits. SolveFlops and SolveTasks are plain functions of their
// input, usable without a hypervisor:
//
//	d, err := hypervisor.SolveFlops(hypervisor.FlopsProblem{
//		Flops:   []float64{2e10, 6e10},                 // per context
//		Speed:   [][]float64{{1e9, 10e9}, {1e9, 20e9}}, // [context][cpu, gpu]
//		Workers: []int{8, 1},                           // per kind
//	})
//	// d.Workers = [[7 0] [1 1]], d.End = 2.86 s
//
// A custom policy implements Policy (Resize, a plain function of a View)
// and, to observe events, Hooks; a hook returning true asks for a resize
// at once. A policy that wraps a built-in one forwards the interfaces it
// implements (Hooks, Feedback, TaskTyped): New looks for them on the
// policy it is given.
// A panic in the policy's code (or WithOnResize's function) is
// recovered: the policy is called no more, and Err and Close return an
// error wrapping ErrPolicyPanic that says where it panicked.
//
// # Triggers
//
// TriggerIdle considers a resize when a worker has been idle longer than
// WithMaxIdle (per worker: WithWorkerMaxIdle); TriggerSpeed at the end of
// each sampling window (WithWindow). Under the speed trigger, feft and
// teft compare each context's monitored speed over the window with the
// speed the linear program plans for it (its remaining flops over the
// predicted end) and move workers toward the program's distribution
// when they part by more than WithSpeedGap; under the idle trigger, when
// a context that must give workers has an idle one. WithTrigger or PZ_HYPERVISOR_TRIGGER
// (idle, speed, idle,speed, none) choose them; the default depends on the
// policy (DefaultTrigger). PZ_HYPERVISOR_POLICY, PZ_HYPERVISOR_MAX_IDLE,
// PZ_HYPERVISOR_WINDOW and PZ_HYPERVISOR_SPEED_GAP set the other
// defaults. Resizes are at least WithMinInterval apart. An idle
// hypervisor backs off: while the decisions of these triggers move
// nothing and nothing happens (no task submitted, taken or completed,
// no worker's idle period starting, ending or reaching its threshold,
// no registration or declared work changed, no move), they run less
// and less often, down to one per 100 ms, and then not at all: idle
// workers sleep until such an event, which brings them back to the
// idle tick (see Policy and NextIdleCycle). An idle program with its
// hypervisor open costs no CPU.
//
// # Resizes
//
// Decisions run on the worker whose hook fired, one at a time: a worker
// that finds a decision under way does not wait (TryLock) but leaves its
// trigger pending, and the worker holding the decision runs the pending
// ones before it lets go, so that no decision asked for is lost; once
// Close was called the holder leaves them to Close, which runs them
// before it returns (or reports in its error why it could not). Moves
// the hypervisor refuses are reported to a policy implementing Feedback;
// app_driven keeps such requests due and retries them when their
// source, destination or limits change, or at the latest every 100 ms
// (it clips a request to the room its destination's Limits.Max
// leaves). Moves are
// posted with scheduler.MoveWorkersFor and applied by each worker at its
// next safe point, so a resize never interrupts a task. The hypervisor
// enforces each context's Limits and never empties a context that has
// pending tasks. The registered contexts must not share workers: the
// global context, and a context nested in a registered one, are
// refused. Every resize is logged (WithLogger), reported to
// WithOnResize, listed by Resizes,
// and recorded by the scheduler (Scheduler.Resizes, the trace and the
// Gantt chart show which context each worker was in, when).
package hypervisor
