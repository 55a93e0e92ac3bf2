package progress_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/pzgo/pz/internal/progress"
)

// A bar on a non-terminal prints nothing, so it is safe to use
// unconditionally on the root rank: here standard output is the test's
// pipe, not a terminal.
func Example() {
	bar := progress.New(os.Stdout, "tiles", 4)
	for range 4 {
		bar.Add(1)
	}
	bar.Done()
	fmt.Println("enabled:", bar.Enabled())
	// Output: enabled: false
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
