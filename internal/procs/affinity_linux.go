package procs

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// This file reads Linux's CPU affinity; affinity_other.go is its
// counterpart for the systems that have none to read (see the package
// documentation, "Other systems").

// AllowedCPUs returns the number of CPUs in this process's affinity mask
// (sched_getaffinity), i.e. the CPUs the kernel lets it run on.
func AllowedCPUs() (int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 0, fmt.Errorf("procs: sched_getaffinity: %w", err)
	}
	return set.Count(), nil
}

// OnlineCPUs returns the number of CPUs online on this machine, from
// /sys/devices/system/cpu/online, or 0 if that cannot be read.
func OnlineCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return 0
	}
	n, err := ParseCPUList(string(b))
	if err != nil {
		return 0
	}
	return n
}

// AffinityMask returns this process's affinity mask (sched_getaffinity).
func AffinityMask() (CPUMask, error) {
	var set unix.CPUSet
	var m CPUMask
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return m, fmt.Errorf("procs: sched_getaffinity: %w", err)
	}
	for c := range MaskWords * 64 {
		if set.IsSet(c) {
			m[c/64] |= 1 << (c % 64)
		}
	}
	return m, nil
}
