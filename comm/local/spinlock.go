package local

import (
	"runtime"
	"sync/atomic"
)

// spinLock guards a mailbox. Its critical sections are a few dozen
// nanoseconds (a scan of short queues and an append), and in a halo
// exchange both ranks take the receiver's box at the same moment. A
// sync.Mutex that finds it held spins in bursts of 30 PAUSE instructions
// before it looks again, then parks on a semaphore; on this project's
// AMD VM a PAUSE takes ~65 cycles, so a waiter looked again only after
// ~0.7 µs, ten times the section it waited for (sync.Mutex's spinning was
// 15% of a 2-rank halo exchange's CPU). A spinLock looks after every
// PAUSE and yields the processor after spinLockPauses of them, so that a
// holder that lost its P (more ranks than cores) gets to run and release.
type spinLock struct{ held atomic.Uint32 }

// spinLockPauses is how many PAUSEs a waiter spends before it yields,
// about as long as a few critical sections.
const spinLockPauses = 64

func (l *spinLock) Lock() {
	for i := 0; ; i++ {
		if l.held.Load() == 0 && l.held.CompareAndSwap(0, 1) {
			return
		}
		if i < spinLockPauses {
			pause()
		} else {
			runtime.Gosched()
		}
	}
}

func (l *spinLock) Unlock() { l.held.Store(0) }
