package local

import (
	"runtime"
	"sync"
	"testing"
)

// TestSpinLockExcludes runs more goroutines than Ps through one
// spinLock, so that waiters both pause and yield: a plain counter under
// the lock must count every increment (and -race sees the lock order
// the goroutines' accesses).
func TestSpinLockExcludes(t *testing.T) {
	var l spinLock
	n := 4 * runtime.GOMAXPROCS(0)
	const per = 20000
	count := 0
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for range per {
				l.Lock()
				count++
				l.Unlock()
			}
		})
	}
	wg.Wait()
	if count != n*per {
		t.Fatalf("count = %d, want %d: the lock let two holders in", count, n*per)
	}
}
