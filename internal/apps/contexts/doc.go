// Package contexts is the `pzrun contexts` demo of scheduling contexts
// and the context hypervisor: two tiled Cholesky factorizations of
// unequal sizes run concurrently, several ways, each on a fresh
// scheduler with the same workers:
//
//   - global: both in the global context, sharing every worker;
//   - static: each in its own context with half the workers;
//   - hypervisor: the same two contexts, resized at run time by a
//     hypervisor policy (gflops_rate by default: workers shared in
//     proportion to the remaining flops, and those of a finished
//     context moved to the other), once per policy of
//     Options.Hypervisor ("idle,feft,teft" compares the idle strategy
//     with the linear programs; under teft each context's Cholesky task
//     types and counts are announced before submission).
//
// Run prints each run's makespan and each hypervisor policy's gain over
// the static split, the global context and idle, as a table or as JSON lines
// (field names documented on ModeResult and Result), and can write the
// hypervisor run's trace and Gantt chart (Options.Trace), which show
// each worker's context over time.
//
//	res, err := contexts.Run(ctx, contexts.Options{Small: 1024, Large: 2048, JSON: true}, os.Stdout)
//
// When the loads are unequal, the static split leaves the small
// factorization's workers idle once it is done while the large one
// still runs on half the machine; the hypervisor gives them to the
// large one, so its makespan is close to the global context's and
// shorter than the static split's.
package contexts
