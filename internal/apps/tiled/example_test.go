package tiled_test

import (
	"fmt"

	"github.com/pzgo/pz/internal/apps/tiled"
	"github.com/pzgo/pz/internal/linalg"
)

// A seeded SPD matrix factors, and the option check names the fix.
func Example() {
	a := tiled.SPD[float64](64, 1)
	fmt.Println(linalg.Potrf(64, a, 64))
	fmt.Println(tiled.CheckShape(1000, 64, 32))
	// Output:
	// <nil>
	// apps: invalid options: matrix size 1000 is not a multiple of block size 64 (try -n 1024)
}

// A rank that owns tile (2, 1) of a 4×4-tile SPD matrix generates that
// tile alone: the same values as that part of the whole matrix.
func ExampleSPDTile() {
	const n, b = 64, 16
	whole := tiled.SPD[float64](n, 1)
	t := make([]float64, b*b)
	tiled.SPDTile(t, b, n, 1, 2*b, 1*b, b, b)
	same := true
	for r := range b {
		for c := range b {
			same = same && t[r*b+c] == whole[(2*b+r)*n+1*b+c]
		}
	}
	fmt.Println("tile (2, 1) equals the whole matrix's:", same)
	// Output: tile (2, 1) equals the whole matrix's: true
}
