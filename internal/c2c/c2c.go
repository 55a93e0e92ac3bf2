// Package c2c measures the machine's core-to-core latency: how long a
// cache line written on one core takes to be read on another and
// answered. Every cost the scheduler and the in-process backend pay per
// task or per message is a handful of such crossings, and on a virtual
// machine it varies several-fold within seconds as the host moves the
// virtual CPUs (on this project's 2-core VM the round trip went from 132
// to 550 ns between two 0.2-second samples); the benchmarks record it
// beside their figures so that a slow phase can be told from a slower
// build.
package c2c

import (
	"errors"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/pzgo/pz/internal/spin"
)

// ErrOneCore is returned by RoundTrip when the process cannot run two
// goroutines at once (GOMAXPROCS or the CPU count is 1): the two ends
// would take turns instead of crossing cores.
var ErrOneCore = errors.New("c2c: one core: no core-to-core latency to measure")

// line is a cache line of its own.
type line struct {
	v atomic.Int64
	_ [56]byte
}

// RoundTrip returns the mean time of n round trips of a cache line
// between two goroutines, each locked to an OS thread (which the
// operating system runs on two cores while both spin). The two must be
// able to run at once: the caller keeps the process otherwise idle.
func RoundTrip(n int) (time.Duration, error) {
	if runtime.GOMAXPROCS(0) < 2 || runtime.NumCPU() < 2 {
		return 0, ErrOneCore
	}
	if n < 1 {
		n = 1
	}
	l := new(line)
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		l.v.Store(-1) // running
		for i := int64(1); i <= int64(n); i++ {
			for l.v.Load() != 2*i-1 {
				spin.Pause()
			}
			l.v.Store(2 * i)
		}
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for l.v.Load() != -1 {
		runtime.Gosched()
	}
	t0 := time.Now()
	for i := int64(1); i <= int64(n); i++ {
		l.v.Store(2*i - 1)
		for l.v.Load() != 2*i {
			spin.Pause()
		}
	}
	d := time.Since(t0)
	<-done
	return d / time.Duration(n), nil
}
