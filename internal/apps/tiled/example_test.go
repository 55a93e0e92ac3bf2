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
