package progress_test

import (
	"fmt"
	"os"

	"github.com/pzgo/pz/internal/progress"
)

// A bar on a non-terminal prints nothing, so it is safe to use
// unconditionally on the root rank.
func Example() {
	bar := progress.New(os.Stdout, "tiles", 4)
	for range 4 {
		bar.Add(1)
	}
	bar.Done()
	fmt.Println("enabled:", bar.Enabled())
	// Output: enabled: false
}
