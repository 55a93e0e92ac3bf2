package dist

import (
	"math/rand/v2"
	"testing"
)

// TestRankSet compares rankSet with a map through random adds and
// resets, on communicators small and large enough for the list to turn
// into a bit set.
func TestRankSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, size := range []int{1, 2, 7, 64, 200, 4096} {
		var s rankSet
		want := map[int]bool{}
		for step := range 3000 {
			r := rng.IntN(size)
			if rng.IntN(50) == 0 {
				s.only(r)
				want = map[int]bool{r: true}
			} else {
				s.add(r, size)
				want[r] = true
			}
			for q := range min(size, 300) {
				if s.has(q) != want[q] {
					t.Fatalf("size %d, step %d: has(%d) = %v, want %v", size, step, q, s.has(q), want[q])
				}
			}
		}
		if size >= 4096 && s.bits == nil && len(want) > size/32 {
			t.Fatalf("size %d: %d members kept in a list", size, len(want))
		}
	}
	var small rankSet
	for r := range 4 {
		small.add(r*100, 4096)
	}
	if small.bits != nil || len(small.list) != 4 {
		t.Fatalf("4 holders of 4096 ranks: list %v, bits %d words; want a list of 4", small.list, len(small.bits))
	}
}
