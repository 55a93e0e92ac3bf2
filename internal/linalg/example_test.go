package linalg_test

import (
	"fmt"

	"github.com/pzgo/pz/internal/linalg"
)

// A 2×2-tile Cholesky of a 4×4 matrix: factor the first diagonal tile,
// solve the tile below it, update the second diagonal tile, factor it.
func Example() {
	const n, b = 4, 2
	a := []float64{
		4, 2, 2, 0,
		2, 5, 3, 1,
		2, 3, 6, 2,
		0, 1, 2, 7,
	}
	tile := func(i, j int) []float64 { return a[i*b*n+j*b:] }
	if err := linalg.Potrf(b, tile(0, 0), n); err != nil {
		fmt.Println(err)
		return
	}
	linalg.Trsm(b, b, tile(0, 0), n, tile(1, 0), n)
	linalg.Syrk(b, b, tile(1, 0), n, tile(1, 1), n)
	if err := linalg.Potrf(b, tile(1, 1), n); err != nil {
		fmt.Println(err)
		return
	}
	for i := range n {
		fmt.Printf("%.4g\n", a[i*n:i*n+i+1])
	}
	// L is the lower triangle; 2.487 = √(7 − 0² − 0.5² − 0.75²).

	// Output:
	// [2]
	// [1 2]
	// [1 1 2]
	// [0 0.5 0.75 2.487]
}
