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

// ErrBusy is returned by RoundTrip when the round trips took longer than
// its budget: the two threads did not run at once, as on a machine
// busy with other work, and what was timed was the operating system's
// scheduling, not the cache.
var ErrBusy = errors.New("c2c: the two threads did not run at once (the machine is busy): no core-to-core latency measured")

// stop, written in place of a round's value, tells the answering
// goroutine to leave.
const stop = -2

// line is a cache line of its own.
type line struct {
	v atomic.Int64
	_ [56]byte
}

// RoundTrip returns the mean time of n round trips of a cache line
// between two goroutines, each locked to an OS thread (which the
// operating system runs on two cores while both spin). The two must be
// able to run at once: the caller keeps the process otherwise idle. It
// gives up with ErrBusy when the round trips take more than budget in
// all (more than a few µs each: the threads took turns).
func RoundTrip(n int, budget time.Duration) (time.Duration, error) {
	if runtime.GOMAXPROCS(0) < 2 || runtime.NumCPU() < 2 {
		return 0, ErrOneCore
	}
	n = max(n, 1)
	l := new(line)
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		l.v.Store(-1) // running
		for i := int64(1); i <= int64(n); i++ {
			// The answer is a CompareAndSwap so that it never
			// overwrites a stop written since the question was read.
			for !l.v.CompareAndSwap(2*i-1, 2*i) {
				if l.v.Load() == stop {
					return
				}
				spin.Pause()
			}
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
		for spins := 1; l.v.Load() != 2*i; spins++ {
			spin.Pause()
			if spins%4096 == 0 && time.Since(t0) > budget {
				l.v.Store(stop)
				<-done
				return 0, ErrBusy
			}
		}
		if i%256 == 0 && time.Since(t0) > budget {
			l.v.Store(stop)
			<-done
			return 0, ErrBusy
		}
	}
	d := time.Since(t0)
	<-done
	return d / time.Duration(n), nil
}

// Sample is the benchmarks' sample: RoundTrip of 5,000 round trips
// (0.5-5 ms on the project's VM) within 20 ms.
func Sample() (time.Duration, error) { return RoundTrip(5000, 20*time.Millisecond) }
