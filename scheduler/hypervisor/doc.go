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
//     context with the highest instant speed to the one with the lowest.
//   - throughput (Throughput): a worker moves from the context where it
//     adds least speed to the one where it adds most (total speed up).
//
// A custom policy implements Policy (Resize, a plain function of a View)
// and, to observe events, Hooks; a hook returning true asks for a resize
// at once.
//
// # Triggers
//
// TriggerIdle considers a resize when a worker has been idle longer than
// WithMaxIdle (per worker: WithWorkerMaxIdle); TriggerSpeed at the end of
// each sampling window (WithWindow). WithTrigger or PZ_HYPERVISOR_TRIGGER
// (idle, speed, idle,speed, none) choose them; the default depends on the
// policy (DefaultTrigger). PZ_HYPERVISOR_POLICY, PZ_HYPERVISOR_MAX_IDLE,
// PZ_HYPERVISOR_WINDOW and PZ_HYPERVISOR_SPEED_GAP set the other
// defaults. Resizes are at least WithMinInterval apart.
//
// # Resizes
//
// Decisions run on the worker whose hook fired, one at a time: a worker
// that finds a decision under way does not wait (TryLock). Moves are
// posted with scheduler.MoveWorkersFor and applied by each worker at its
// next safe point, so a resize never interrupts a task. The hypervisor
// enforces each context's Limits and never empties a context that has
// pending tasks. Every resize is logged (WithLogger), listed by Resizes,
// and recorded by the scheduler (Scheduler.Resizes, the trace and the
// Gantt chart show which context each worker was in, when).
package hypervisor
