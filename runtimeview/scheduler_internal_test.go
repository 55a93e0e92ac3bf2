package runtimeview

import "testing"

// In-process ranks share GOMAXPROCS without leaving a P idle or sharing
// one, and each gets at least one worker.
func TestLocalShare(t *testing.T) {
	for _, tc := range []struct{ procs, n int }{{16, 3}, {16, 16}, {2, 3}, {7, 2}, {1, 1}, {64, 5}} {
		total := 0
		for r := range tc.n {
			s := localShare(tc.procs, tc.n, r)
			if s < 1 {
				t.Errorf("procs %d, %d ranks: rank %d gets %d", tc.procs, tc.n, r, s)
			}
			if lo, hi := tc.procs/tc.n, tc.procs/tc.n+1; s < max(lo, 1) || s > max(hi, 1) {
				t.Errorf("procs %d, %d ranks: rank %d gets %d, outside [%d, %d]", tc.procs, tc.n, r, s, lo, hi)
			}
			total += s
		}
		if want := max(tc.procs, tc.n); total != want {
			t.Errorf("procs %d, %d ranks: %d workers in all, want %d", tc.procs, tc.n, total, want)
		}
	}
}
