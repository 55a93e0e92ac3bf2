//go:build !race

package local_test

import (
	"fmt"
	"testing"

	"github.com/pzgo/pz/comm/commtest"
	"github.com/pzgo/pz/comm/local"
)

// TestLargeCounts runs the large-count cases (buffers past 2^31-1
// elements, as comm/mpi must take them too) on 1 and 2 in-process ranks.
// Not under the race detector, whose instrumentation of the gigabyte
// loops that fill and check them would take many minutes; scripts/test.sh
// runs it without.
func TestLargeCounts(t *testing.T) {
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			commtest.RunLargeGroup(t, n, local.Run)
		})
	}
}
