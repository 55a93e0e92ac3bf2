// Package atomicf provides a float64 that goroutines add to atomically
// (flop counters of the scheduler's workers and of the hypervisor).
package atomicf

import (
	"math"
	"sync/atomic"
)

// A Float64 is a float64 updated with compare-and-swap. The zero value
// is 0. It must not be copied after first use.
type Float64 struct{ bits atomic.Uint64 }

// Add adds v.
func (f *Float64) Add(v float64) {
	for {
		old := f.bits.Load()
		if f.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// Load returns the value.
func (f *Float64) Load() float64 { return math.Float64frombits(f.bits.Load()) }
