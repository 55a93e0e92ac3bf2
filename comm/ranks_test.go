package comm

import (
	"strings"
	"testing"
)

// TestFormatRanks: ranks in ranges, at most eight, so that an error naming
// the ranks a collective waited for stays short at any rank count.
func TestFormatRanks(t *testing.T) {
	many := make([]int, 4095)
	for i := range many {
		many[i] = i + 1
	}
	gaps := []int{}
	for i := 0; i < 40; i += 2 {
		gaps = append(gaps, i)
	}
	for _, c := range []struct {
		in   []int
		want string
	}{
		{[]int{3}, "rank 3"},
		{[]int{0, 2}, "ranks 0, 2"},
		{[]int{0, 1}, "ranks 0-1"},
		{[]int{0, 1, 2, 5, 7, 8}, "ranks 0-2, 5, 7-8 (6 ranks)"},
		{many, "ranks 1-4095 (4095 ranks)"},
		{gaps, "ranks 0, 2, 4, 6, 8, 10, 12, 14, ... (20 ranks)"},
	} {
		if got := FormatRanks(c.in); got != c.want {
			t.Errorf("FormatRanks(%v) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := FormatRanks(many); strings.Count(got, ",") > 8 {
		t.Errorf("rankList of 4095 ranks is long: %q", got)
	}
}
