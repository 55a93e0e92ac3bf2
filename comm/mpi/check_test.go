//go:build mpi

package mpi

import (
	"testing"

	"github.com/pzgo/pz/comm"
)

// desc.hash packs the descriptor's words itself: it must hash as it did
// from words (Fingerprint.Pack), for every call, type and op and a spread
// of counts and roots.
func TestHashMatchesPack(t *testing.T) {
	ref := func(d desc) int64 {
		h := uint64(0x9e3779b97f4a7c15)
		for _, w := range d.words() {
			h = mix(h, w)
		}
		return int64(h >> 1)
	}
	for k := call(0); k < 16; k++ {
		for dt := comm.Datatype(0); dt < 14; dt++ {
			for op := comm.Op(0); op < 14; op++ {
				for _, n := range []int64{noCount, 0, 1, 7, 1 << 31, 1<<62 + 3} {
					for _, root := range []int64{noRoot, 0, 1, 1<<31 - 1} {
						if d := (desc{k, dt, op, n, root}); d.hash() != ref(d) {
							t.Fatalf("%+v: hash %#x, from its words %#x", d, d.hash(), ref(d))
						}
					}
				}
			}
		}
	}
}
