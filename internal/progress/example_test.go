package progress_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/pzgo/pz/internal/progress"
)

// A bar on a file that is not a terminal (here standard output, the
// test's pipe) writes lines for logs, but only once LogEvery has passed:
// this short run prints nothing but its own line.
func Example() {
	bar := progress.New(os.Stdout, "tiles", 4)
	for range 4 {
		bar.Add(1)
	}
	bar.Done()
	fmt.Println("enabled:", bar.Enabled())
	// Output: enabled: true
}

// NewLines writes a line at most every period (0 here: on every Add),
// and a last one from Done; each says how long the work has taken and,
// until it is complete, about how long is left (cut off here, as the
// times vary).
func ExampleNewLines() {
	var out strings.Builder
	bar := progress.NewLines(&out, "tiles", 4, 0)
	for range 4 {
		bar.Add(1)
	}
	bar.Done()
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		line, _, _ = strings.Cut(line, " after ")
		line, _, _ = strings.Cut(line, " in ")
		fmt.Println(line)
	}
	// Output:
	// tiles: 1/4 (25%)
	// tiles: 2/4 (50%)
	// tiles: 3/4 (75%)
	// tiles: 4/4 (100%)
	// tiles: 4/4 (100%)
}

// NewForced draws wherever it is told: each Add redraws the line (with a
// carriage return, so a terminal shows one line), and the last state
// stays. Its final line here, redrawn on every Add:
func ExampleNewForced() {
	var out strings.Builder
	bar := progress.NewForced(&out, "tiles", 4, 0)
	for range 4 {
		bar.Add(1)
	}
	bar.Done()
	lines := strings.Split(strings.TrimSpace(out.String()), "\r")
	fmt.Println(strings.Count(out.String(), "(3/4)"), "drawing of 3/4; last:", lines[len(lines)-1])
	// Output: 1 drawing of 3/4; last: tiles 100% [==============================] (4/4)
}
