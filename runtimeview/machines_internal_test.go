package runtimeview

import (
	"context"
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
