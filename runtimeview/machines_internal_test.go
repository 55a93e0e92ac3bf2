package runtimeview

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/logger"
)

// In-process ranks share one table of machine descriptions, each rank
// filling its own entry: n ranks hold n entries between them, not n each
// (at 10,000 ranks the per-rank tables took 2.8 GB, the shared one 126
// MB all told), and every rank sees every entry filled.
func TestLocalRanksShareMachineTable(t *testing.T) {
	const n = 64
	var mu sync.Mutex
	tables := map[**hardware.Machine]int{}
	err := RunLocal(context.Background(), n, func(ctx context.Context, rt *RuntimeView) error {
		for r, m := range rt.machines {
			if m == nil {
				t.Errorf("rank %d: rank %d's description missing", rt.Rank(), r)
			}
		}
		if rt.ResourceSet(n-1).Rank() != n-1 {
			t.Errorf("rank %d: ResourceSet(%d) is rank %d's", rt.Rank(), n-1, rt.ResourceSet(n-1).Rank())
		}
		mu.Lock()
		tables[&rt.machines[0]]++
		mu.Unlock()
		return nil
	}, WithLogOptions(logger.WithEnv(nil), logger.WithOff()))
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != 1 {
		t.Fatalf("%d ranks hold %d tables of machine descriptions, want 1 shared", n, len(tables))
	}
}

// summarize keeps the message of a signal's joined rank errors short: a
// few ranks' errors and how many it left out.
func TestSummarize(t *testing.T) {
	var errs []error
	for r := range 1024 {
		errs = append(errs, fmt.Errorf("rank %d: interrupted", r))
	}
	got := summarize(errors.Join(errs...), 3)
	want := "rank 0: interrupted\nrank 1: interrupted\nrank 2: interrupted\n(and 1021 more ranks' errors)"
	if got != want {
		t.Fatalf("summarize of 1024 errors:\n%s\nwant\n%s", got, want)
	}
	few := errors.Join(errs[:4]...)
	if got := summarize(few, 3); got != few.Error() {
		t.Fatalf("summarize of 4 errors: %q, want them all", got)
	}
	if got := summarize(errs[5], 3); got != "rank 5: interrupted" {
		t.Fatalf("summarize of one error: %q", got)
	}
}
