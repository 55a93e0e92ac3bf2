package lockedbuf_test

import (
	"fmt"
	"strings"
	"sync"

	"github.com/pzgo/pz/internal/lockedbuf"
)

// Four goroutines write lines into one Buffer at once (in-process ranks
// logging, say) while the test reads it: no line is lost or torn.
func ExampleBuffer() {
	var b lockedbuf.Buffer
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				fmt.Fprintf(&b, "rank %d line %d\n", r, i)
				_ = b.String() // a reader meanwhile
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	whole := 0
	for _, l := range lines {
		var r, i int
		if n, _ := fmt.Sscanf(l, "rank %d line %d", &r, &i); n == 2 {
			whole++
		}
	}
	fmt.Println(len(lines), "lines,", whole, "whole")
	// Output: 400 lines, 400 whole
}
