package local_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/commtest"
	"github.com/pzgo/pz/comm/local"
)

// inModes runs body twice, once for each way a group of several ranks can
// synchronize: every rank watching every slot (GOMAXPROCS 8, above the
// rank counts of these tests) and through the arrival counter (GOMAXPROCS
// 1: more ranks than GOMAXPROCS). counted says which one runs, so that
// both are tested on any machine.
func inModes(t *testing.T, body func(t *testing.T, counted bool)) {
	for _, m := range []struct {
		name    string
		procs   int
		counted bool
	}{{"watched", 8, false}, {"counted", 1, true}} {
		t.Run(m.name, func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(m.procs))
			body(t, m.counted)
		})
	}
}

// TestConformance runs the suite at 1 to 4 ranks in both modes (one rank
// is the same in both).
func TestConformance(t *testing.T) {
	inModes(t, func(t *testing.T, counted bool) {
		for n := 1; n <= 4; n++ {
			if counted && n == 1 {
				continue
			}
			t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
				commtest.RunGroup(t, n, func(ctx context.Context, n int, fn func(ctx context.Context, c comm.Comm) error) error {
					return local.Run(ctx, n, func(ctx context.Context, c comm.Comm) error {
						if got := local.Counted(c); got != (counted && n > 1) {
							return fmt.Errorf("counted group: %v at %d ranks, want %v", got, n, counted)
						}
						return fn(ctx, c)
					})
				})
			})
		}
	})
}
