package plural_test

import (
	"fmt"

	"github.com/pzgo/pz/internal/plural"
)

func ExampleOf() {
	for _, n := range []int{0, 1, 2} {
		fmt.Println(plural.Of(n, "rank"))
	}
	// Output:
	// 0 ranks
	// 1 rank
	// 2 ranks
}
