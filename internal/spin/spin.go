// Package spin provides a lock for critical sections of a few dozen
// nanoseconds that goroutines on different cores take at the same
// moment (comm/local's mailboxes, the scheduler's task queues), and the
// PAUSE instruction polling loops call between checks.
package spin

import (
	"runtime"
	"sync/atomic"
)

// A Lock is a mutual-exclusion lock for very short critical sections.
// A sync.Mutex that finds itself held spins in bursts of 30 PAUSE
// instructions before it looks again, then parks on a semaphore; on this
// project's AMD VM a PAUSE takes ~65 cycles, so a waiter looked again
// only after ~0.7 µs, ten times the section it waited for (sync.Mutex's
// spinning was 15% of a 2-rank halo exchange's CPU in comm/local, and
// the scheduler's task queues lost as much to it when a submitter
// pushed a burst of tasks while workers popped). A Lock looks after
// every PAUSE and yields the processor after Spins of them, so that a
// holder that lost its P (more goroutines than cores) gets to run and
// release. The zero value is unlocked; a Lock must not be copied after
// first use.
type Lock struct{ held atomic.Uint32 }

// Spins is how many PAUSEs a waiter spends before it yields, about as
// long as a few critical sections.
const Spins = 64

// Lock takes l, waiting while another goroutine holds it.
func (l *Lock) Lock() {
	for i := 0; ; i++ {
		if l.held.Load() == 0 && l.held.CompareAndSwap(0, 1) {
			return
		}
		if i < Spins {
			Pause()
		} else {
			runtime.Gosched()
		}
	}
}

// Unlock releases l, which the caller holds.
func (l *Lock) Unlock() { l.held.Store(0) }
