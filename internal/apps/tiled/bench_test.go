package tiled

import (
	"fmt"
	"testing"
)

// sink keeps the benchmarked matrices alive.
var sink []float64

// The whole-matrix generators at the order of a large run (n=4096 is
// 128 MiB of float64).
func BenchmarkSPD(b *testing.B) {
	for _, n := range []int{1024, 4096} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for range b.N {
				sink = SPD[float64](n, 1)
			}
		})
	}
}

func BenchmarkRandom(b *testing.B) {
	for _, n := range []int{1024, 4096} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for range b.N {
				sink = Random[float64](n, n, 1)
			}
		})
	}
}
