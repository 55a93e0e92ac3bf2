package scheduler

import (
	"math/rand/v2"
	"testing"
)

// TestSpanOverlapsExactly compares span.overlaps with the byte sets of
// random contiguous and strided spans.
func TestSpanOverlapsExactly(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func() span {
		lo := uintptr(rng.IntN(64))
		if rng.IntN(3) == 0 {
			return span{lo: lo, hi: lo + uintptr(1+rng.IntN(40))}
		}
		row := uintptr(1 + rng.IntN(6))
		ld := row + uintptr(1+rng.IntN(6))
		rows := uintptr(2 + rng.IntN(5))
		return span{lo: lo, hi: lo + (rows-1)*ld + row, row: row, ld: ld}
	}
	bytes := func(a span) map[uintptr]bool {
		set := map[uintptr]bool{}
		for k := range a.rows() {
			s, e := a.seg(k)
			for x := s; x < e; x++ {
				set[x] = true
			}
		}
		return set
	}
	for i := range 20000 {
		a, b := random(), random()
		want := false
		bb := bytes(b)
		for x := range bytes(a) {
			if bb[x] {
				want = true
				break
			}
		}
		if got := a.overlaps(b); got != want {
			t.Fatalf("case %d: %+v overlaps %+v: got %v, want %v", i, a, b, got, want)
		}
	}
}
