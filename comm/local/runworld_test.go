package local_test

import (
	"flag"
	"fmt"
	"strconv"
	"testing"

	"github.com/pzgo/pz/comm/commtest"
	"github.com/pzgo/pz/comm/local"
)

// TestRunWorld drives commtest.RunWorld, the harness MPI jobs use, with one
// parallel subtest per in-process rank, so that its per-case agreement is
// exercised here too.
func TestRunWorld(t *testing.T) {
	const n = 2
	// The ranks' subtests must run at the same time.
	if f := flag.Lookup("test.parallel"); f != nil {
		if p, err := strconv.Atoi(f.Value.String()); err == nil && p < n {
			t.Skipf("needs -parallel >= %d", n)
		}
	}
	comms, err := local.New(n)
	if err != nil {
		t.Fatal(err)
	}
	for r := range n {
		t.Run(fmt.Sprintf("rank=%d", r), func(t *testing.T) {
			t.Parallel()
			commtest.RunWorld(t, comms[r])
		})
	}
}
