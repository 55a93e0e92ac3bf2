package atomicf_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/pzgo/pz/internal/atomicf"
)

func TestConcurrentAdds(t *testing.T) {
	var f atomicf.Float64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				f.Add(0.5)
			}
		}()
	}
	wg.Wait()
	if got := f.Load(); got != 4000 {
		t.Fatalf("sum of 8000 adds of 0.5 = %v, want 4000", got)
	}
}

func ExampleFloat64() {
	var flops atomicf.Float64
	flops.Add(1.5e9)
	flops.Add(0.5e9)
	fmt.Println(flops.Load())
	// Output: 2e+09
}
