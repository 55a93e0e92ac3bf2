// Package procs sizes this process's Go runtime to its share of the node.
//
// When N MPI ranks run on one machine, each rank's Go runtime would by
// default start GOMAXPROCS = (all cores) threads, and every rank spins on
// every core against the other ranks' MPI progress polling. On a 16-core
// machine this made Go's MPI_Allreduce 1.5-1.9x slower than C and two
// goroutines calling MPI at once took 19 ms per operation. procs computes a
// fair share instead.
//
// # The decision
//
// [Decide] is a pure function of an [Input]: whether the user set the
// GOMAXPROCS environment variable (then nothing changes; a value the Go
// runtime ignores, such as 0, -1 or "abc", is ignored here too, and the
// reason says so), the number of ranks on this node, the CPUs this
// process may run on (its affinity mask, [AllowedCPUs]; every CPU on
// systems without one, see "Other systems"), the CPUs online on the node,
// and the CPU quota of its cgroup ([CgroupCPUQuota]). If the launcher
// bound ranks to a subset of the node (mpirun --bind-to core or socket),
// the affinity mask is already this rank's share and the ranks sharing it
// are estimated from the node-wide ratio; otherwise the allowed CPUs are
// divided among the local ranks.
//
// # Applying it
//
// [Apply] gathers the inputs from the running process, calls Decide and sets
// runtime.GOMAXPROCS, returning a [Report] that `pzrun info` prints.
// GOMAXPROCS is process-wide state: call Apply once, early, from the code
// that owns the process (comm/mpi.Init does, unless told not to).
//
//	rep := procs.Apply(localRanks)
//	fmt.Println(rep) // "GOMAXPROCS 16 -> 4: 16 allowed CPUs shared by 4 local ranks (estimated)"
//
// Apply cannot fail: an input it cannot read (affinity mask, cgroup quota)
// is left unknown, and Decide falls back on what is known. ExampleApply and
// ExampleReport_String compile this snippet.
//
// # Other systems
//
// Affinity is Linux's: [AllowedCPUs], [OnlineCPUs] and [AffinityMask] read
// sched_getaffinity and /sys/devices/system/cpu/online there
// (affinity_linux.go). Elsewhere - macOS, where a scientist rehearses a job
// with `pzrun -n 8`, and FreeBSD or Windows - pz reads no affinity mask
// (affinity_other.go): a process may use every CPU, AllowedCPUs and
// OnlineCPUs both return runtime.NumCPU (sysctl hw.ncpu on macOS), and
// AffinityMask holds CPUs 0 to runtime.NumCPU()-1, so the local ranks
// split the machine evenly. There is no cgroup either: [CgroupCPUQuota]
// finds no /proc/self/cgroup and reports no limit. [Decide] is the same
// everywhere.
//
// The affinity and cgroup readers are exported for package hardware.
package procs
