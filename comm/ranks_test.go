package comm

import (
	"errors"
	"fmt"
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

// RankErrors names ranks that failed alike once: the cause, then the
// consequences that differ only by the rank's own number, as one line; a
// number that is not the rank's own (rank 70 on rank 7, the failed rank
// named by the others) stays.
func TestRankErrorsGroups(t *testing.T) {
	var es RankErrors
	es = append(es, &RankError{Rank: 5, Err: errors.New("boom")})
	for r := range 64 {
		if r != 5 {
			es = append(es, &RankError{Rank: r, Err: fmt.Errorf("local: Barrier on rank %d: comm: broken: rank 5 failed: boom", r)})
		}
	}
	es = append(es, &RankError{Rank: 7, Err: errors.New("crank 7 saw rank 70 and rank 7.5")})
	want := "rank 5: boom\n" +
		"ranks R = 0-4, 6-63 (63 ranks): local: Barrier on rank R: comm: broken: rank 5 failed: boom\n" +
		"rank 7: crank 7 saw rank 70 and rank 7.5"
	if got := es.Error(); got != want {
		t.Errorf("Error() =\n%s\nwant\n%s", got, want)
	}
	// A rank alone keeps its own words; ranks alike without their number
	// are named plainly.
	two := RankErrors{{Rank: 3, Err: errors.New("on rank 3: x")}, {Rank: 0, Err: errors.New("interrupted")}, {Rank: 1, Err: errors.New("interrupted")}}
	if got, want := two.Error(), "rank 3: on rank 3: x\nranks 0-1: interrupted"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	// A message the same to the letter on every rank, which names ranks
	// (an argument mismatch lists each rank's), is one line as it is, not
	// one per rank with its own number written R.
	mismatch := "comm: Bcast: arguments differ across ranks: root: rank 0 has 0, rank 1 has 1"
	three := RankErrors{{Rank: 0, Err: errors.New(mismatch)}, {Rank: 1, Err: errors.New(mismatch)}, {Rank: 2, Err: errors.New(mismatch)}}
	if got, want := three.Error(), "ranks 0-2 (3 ranks): "+mismatch; got != want {
		t.Errorf("Error() =\n%s\nwant\n%s", got, want)
	}
	// Every rank's error stays reachable.
	var re *RankError
	if !errors.As(es, &re) || re.Rank != 5 {
		t.Errorf("errors.As finds %v, want rank 5's error first", re)
	}
	if n := len(es.Unwrap()); n != 65 {
		t.Errorf("Unwrap gives %d errors, want 65", n)
	}
}

// Past maxGroups kinds of failure, RankErrors counts the rest.
func TestRankErrorsManyKinds(t *testing.T) {
	var es RankErrors
	for r := range 1024 {
		es = append(es, &RankError{Rank: r, Err: fmt.Errorf("failed %d ms in", r*7%100)})
	}
	got := es.Error()
	if lines := strings.Count(got, "\n") + 1; lines != maxGroups+1 {
		t.Errorf("%d lines, want %d:\n%s", lines, maxGroups+1, got)
	}
	if !strings.HasSuffix(got, "failed in 94 other ways)") {
		t.Errorf("last line does not count the rest:\n%s", got)
	}
}
