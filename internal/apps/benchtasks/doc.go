// Package benchtasks is the logic of `pzrun bench tasks`: the scheduler's
// cost per task and its parallel efficiency by task grain, next to the
// same figures of StarPU (../shared/peers/starpu) and, for the cost per
// task, of OpenMP tasks with depend clauses (a program of this package).
//
// # Cases
//
// For every policy, worker count and number of submitting goroutines (1
// and 2: submission must not serialize the workers), Run measures:
//
//   - indep: independent empty tasks without data, all submitted then
//     waited for (µs per task);
//   - chain: tasks incrementing one counter through RW on one handle, so
//     implicit dependencies chain them (µs per task);
//   - handles4: the same with RW on four handles per task (µs per task);
//   - grain: independent tasks spinning 1, 16 and 256 µs of calibrated
//     CPU work (Spin, CalibrateSpin; never a sleep), 5000 per worker;
//     efficiency = the same spins run back to back on one goroutine /
//     (workers × wall time).
//
// By default the submitting goroutines are apart from the workers. With
// Options.SubmittersWork each submitter is one of them instead (a
// scheduler.Driver: Driver.Submit runs tasks past its limit of tasks in
// flight, Driver.WaitAll runs tasks while waiting), the layout of an
// OpenMP team whose creating thread is one of its threads; the records
// then carry submitters_work.
//
// These are the cases of StarPU's tasks_overhead and tasks_size_overhead
// and of the peer script's starpu_overhead.c; PeerName documents the
// mapping of each case to the peer script's figure names. The counters
// are checked after each case: a lost or repeated task is an error.
//
// # Output
//
// One JSON object per line (Record; its field names are a stable
// interface):
//
//	{"bench":"tasks_overhead","case":"chain","policy":"lws","workers":2,"submitters":1,"tasks":100000,
//	 "value":0.31,"unit":"us/task","peer":"starpu_c_rw1_lws_total","peer_value":2.92,"ratio":0.106,
//	 "openmp_peer":"omp_chain_2threads","openmp_value":0.62,"openmp_ratio":0.5,"openmp_paired_ratio":0.48}
//
// WriteTable prints the same records as an aligned table.
//
// # Peer figures
//
// Peer figures come from a results file in the peer script's
// "name value unit" format (ParsePeer), or are measured in the same
// invocation by RunStarPU when StarPU 1.3 is installed
// (apt-get install libstarpu-dev starpu-examples).
//
// OpenMP figures come from RunOpenMP: it writes omp/omp_tasks.c (embedded
// in the package) to a temporary folder, builds it with the system C
// compiler (cc -O2 -fopenmp) and runs it with OMP_NUM_THREADS equal to
// pz's worker count on the overhead cases: independent tasks, a chain of
// depend(inout) on one variable, and depend(inout) on the same four
// variables per task. One thread of the team creates every task, as one
// goroutine submits pz's (1 submitter). Without a compiler that can build
// OpenMP code, RunOpenMP returns ErrNoOpenMP and pzrun prints a note
// instead of the figures. NewOpenMPPeer builds the program once; its
// Paired method runs one round per call, and Options.PairedOpenMP puts
// such a round beside each of pz's timed rounds, for the
// openmp_paired_ratio figure (pzrun's default).
package benchtasks
