// Package hardware reports what this machine has and what this process may
// use of it: CPU cores, sockets, NUMA nodes and caches, the CPUs the
// process may run on and its cgroup CPU quota, RAM honouring cgroup memory
// limits, and CUDA GPUs.
//
//	m, err := hardware.Discover(ctx)
//	if err != nil { ... }
//	fmt.Println(m.CPU.LogicalCores, m.CPU.Usable(), m.Memory.AvailableBytes, len(m.GPUs))
//
// A Machine is plain data with stable JSON field names: resource sets
// exchange it between ranks and `pzrun info --json` prints it.
//
// # Sources
//
// Everything is read directly from procfs and sysfs:
//
//   - /proc/cpuinfo: vendor and model; cores and sockets when sysfs has no
//     topology.
//   - /sys/devices/system/cpu/online and cpuN/topology: logical CPUs,
//     physical cores (distinct core_cpus_list sets), sockets (distinct
//     physical_package_id values).
//   - /sys/devices/system/cpu/cpuN/cache/indexM: caches, grouped into one
//     entry per level and type with the CPUs sharing each instance.
//   - /sys/devices/system/node/nodeN: NUMA nodes, their CPUs, memory and
//     distances.
//   - /proc/self/status (Cpus_allowed_list): the affinity mask, of which
//     the online CPUs count (as sched_getaffinity reports it).
//   - /proc/self/cgroup and /sys/fs/cgroup: the CPU quota (cgroup v2
//     cpu.max, v1 cpu.cfs_quota_us; read by internal/procs, which also
//     sizes GOMAXPROCS) and the memory limit (v2 memory.max, v1
//     memory.limit_in_bytes), walking from the process's cgroup up to the
//     root so that a limit set on a parent (a Kubernetes pod, a systemd
//     slice) counts.
//   - /proc/meminfo: host memory.
//   - the CUDA driver, through package [github.com/pzgo/pz/hardware/cuda]:
//     GPUs. No driver means no GPUs, not an error.
//   - NVML, through package [github.com/pzgo/pz/hardware/nvml]: each GPU's
//     free memory, without a CUDA context. Without NVML, or for a device
//     it does not know, a context on the device answers instead (see GPU).
//
// WithRoot points Discover at another directory holding proc/ and sys/, so
// tests feed it fake trees (testdata/*.txtar: a 2-socket NUMA machine,
// containers with cgroup v1 and v2 limits, nested Kubernetes limits,
// malformed files).
//
// # Other systems
//
// The sources above are Linux's. pz builds and runs on macOS too (a
// scientist rehearses a job there with `pzrun -n 8`), and its portable
// packages build for FreeBSD. On the real root of a system without procfs
// and sysfs, Discover takes the CPUs from the Go runtime (runtime.NumCPU:
// sysctl hw.ncpu on macOS) and, there being no affinity mask to read,
// allows every one of them; physical cores equal logical ones (nothing
// says which share a core), and sockets, NUMA nodes, caches, the CPU
// model and the cgroup quota are unknown or absent. There is no
// /proc/meminfo: on macOS the total memory comes from sysctl hw.memsize
// and the available memory is unknown (0, with a warning); elsewhere both
// are unknown. GPUs are none: CUDA does
// not exist on macOS, so package cuda's Open finds no libcuda.so.1 and
// reports ErrNoDriver, which is zero GPUs, not an error. A fake root
// (WithRoot) is read the same way on every system.
//
// # Why not ghw or gopsutil
//
// github.com/jaypipes/ghw and github.com/shirou/gopsutil read the same
// files, and both are well kept, but neither answers the question a rank
// asks: how much of this machine may I use?
//
//   - Memory in containers: gopsutil's mem.VirtualMemory returns the host's
//     /proc/meminfo figures inside a container (shirou/gopsutil issue 1758,
//     open), and ghw's memory info likewise describes the host. A rank that
//     sizes buffers from them is OOM-killed at the container limit. Here
//     the effective total and available memory are lowered to the cgroup
//     limit and headroom, and the raw figures are kept beside them.
//   - CPU share: neither reports the affinity mask or a cgroup v2 CPU
//     quota, which is what mpirun --bind-to and container runtimes set.
//   - GPUs: ghw names GPUs from the PCI ID database, without CUDA ordinals,
//     SM counts, compute capability or free memory; gopsutil has no GPUs.
//     Both would still need the CUDA driver for those.
//   - Testing: both select an alternative root through environment
//     variables or global options (GHW_CHROOT, HOST_PROC/HOST_SYS), which
//     is process-wide state; pz runs several in-process ranks and keeps no
//     package-level mutable state, so the root is an Option here.
//   - Weight: each pulls in a dependency tree (PCI database, YAML, WMI and
//     sysconf helpers, platform code for operating systems pz does not
//     target) for perhaps 600 lines of parsing that is easy to test.
//
// # Degrading gracefully
//
// Missing or malformed files never cause an error or a panic: the fields
// they would fill keep their documented zero values (0 counts, empty
// lists, "" strings), and unexpected failures (no /proc/meminfo, no CPU
// list, a CUDA driver that fails to initialize) are listed in
// Machine.Warnings. Caches and NUMA nodes are often absent in virtual
// machines; that is not a warning.
package hardware
