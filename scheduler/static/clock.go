package static

import "time"

// A clock reads CLOCK_MONOTONIC cheaply: the offset between it and this
// process's monotonic time.Now is measured once, after which a reading
// costs one time.Since (a vDSO call) instead of a system call. Every
// process of the machine reads the same clock, so planned times agree
// across clients.
type clock struct {
	base time.Time
	off  int64
}

func newClock() clock {
	best := clock{}
	bestErr := int64(1 << 62)
	// The narrowest of a few brackets bounds the offset's error.
	for range 5 {
		t1 := monoSyscall()
		base := time.Now()
		t2 := monoSyscall()
		if e := t2 - t1; e < bestErr {
			bestErr = e
			best = clock{base: base, off: t1 + e/2}
		}
	}
	return best
}

// now returns CLOCK_MONOTONIC in nanoseconds.
func (c clock) now() int64 { return c.off + int64(time.Since(c.base)) }

// sleepUntil returns at t (CLOCK_MONOTONIC ns) or soon after: it sleeps
// the thread until spin before t, then spins, yielding the core to any other thread that wants it. Call
// it on a locked thread.
func (c clock) sleepUntil(t int64, spin time.Duration) {
	if t-c.now() > int64(spin) {
		sleepAbs(t - int64(spin))
	}
	for c.now() < t {
		yieldThread()
	}
}
