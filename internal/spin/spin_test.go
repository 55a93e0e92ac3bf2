package spin_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/pzgo/pz/internal/spin"
)

// TestLockExcludes runs more goroutines than Ps through one Lock, so
// that waiters both pause and yield: a plain counter under
// the lock must count every increment (and -race sees the lock order
// the goroutines' accesses).
func TestLockExcludes(t *testing.T) {
	var l spin.Lock
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

// Two goroutines take turns on a counter under a Lock.
func ExampleLock() {
	var (
		l     spin.Lock
		n     int
		wg    sync.WaitGroup
		turns = 1000
	)
	for range 2 {
		wg.Go(func() {
			for range turns {
				l.Lock()
				n++
				l.Unlock()
			}
		})
	}
	wg.Wait()
	fmt.Println(n)
	// Output: 2000
}
