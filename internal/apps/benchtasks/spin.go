package benchtasks

import (
	"time"
)

// Spin runs iters rounds of a xorshift generator from x and returns the
// final state. It is the busy task body of the grain benchmark: pure CPU
// work, no memory traffic, no system calls, and a result the compiler
// must compute as long as the caller uses it (an unused result lets the
// compiler drop the loop).
func Spin(iters int, x uint64) uint64 {
	x |= 1 // xorshift's only fixed point is 0
	for range iters {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// CalibrateSpin returns how many Spin iterations take about one
// microsecond on the calling goroutine: the best of several timings of a
// fixed count, so a preempted timing does not lower the rate.
func CalibrateSpin() float64 {
	const iters = 1 << 20 // about a millisecond: long against the clock's resolution
	best := time.Duration(1<<63 - 1)
	var sink uint64
	for range 7 {
		t0 := time.Now()
		sink += Spin(iters, sink)
		best = min(best, time.Since(t0))
	}
	if sink == 0 { // never true (Spin never returns 0); keeps the loop live
		best++
	}
	return float64(iters) / (float64(best) / float64(time.Microsecond))
}
