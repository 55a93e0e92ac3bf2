//go:build unix

package scheduler_test

import (
	"syscall"
	"time"
)

// processCPU returns the user+system CPU time used by this process, so
// benchmarks can report CPU per task, which other processes on a loaded
// machine do not inflate the way they inflate wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
