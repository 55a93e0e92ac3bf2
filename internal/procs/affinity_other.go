//go:build !linux

package procs

import "runtime"

// This file stands in for affinity_linux.go on systems where pz reads no
// CPU affinity (macOS, the BSDs, Windows): a process may run on every
// CPU, and the CPUs are those the Go runtime counts (see the package
// documentation, "Other systems").

// AllowedCPUs returns the number of CPUs this process may run on. Without
// an affinity mask to read, that is every CPU the Go runtime counts
// (runtime.NumCPU: sysctl hw.ncpu on macOS; on FreeBSD the process's
// cpuset, which the runtime reads itself). The error is always nil.
func AllowedCPUs() (int, error) {
	return runtime.NumCPU(), nil
}

// OnlineCPUs returns the number of CPUs online on this machine:
// runtime.NumCPU, the same count AllowedCPUs returns, so a process is
// never taken to be bound to part of the machine.
func OnlineCPUs() int {
	return runtime.NumCPU()
}

// AffinityMask returns a mask of CPUs 0 to AllowedCPUs()-1 (at most
// MaskWords*64): every process may run on every CPU, so ranks that
// exchange their masks (MaskShare) split the machine evenly. The error is
// always nil.
func AffinityMask() (CPUMask, error) {
	var m CPUMask
	for c := range min(runtime.NumCPU(), MaskWords*64) {
		m[c/64] |= 1 << (c % 64)
	}
	return m, nil
}
