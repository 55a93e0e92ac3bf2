//go:build !linux

package hardware

import "runtime"

// osCPUs lists CPUs 0 to runtime.NumCPU()-1 when Discover reads the real
// root of a system without procfs and sysfs (macOS, the BSDs, Windows),
// and nil for a fake root (WithRoot), which describes its machine alone.
// Such a system gives pz no affinity mask either: the process may run on
// every CPU (see package internal/procs).
func osCPUs(real bool) []int {
	if !real {
		return nil
	}
	cpus := make([]int, runtime.NumCPU())
	for i := range cpus {
		cpus[i] = i
	}
	return cpus
}
