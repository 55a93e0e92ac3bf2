package scheduler_test

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestStressNoTaskLostOrRunTwice runs 10^6 tiny tasks (10^5 with -short
// or -race): independent ones, chains on RW handles and fan-in readers,
// from two submitting goroutines, and checks every task ran exactly once.
func TestStressNoTaskLostOrRunTwice(t *testing.T) {
	n := 1_000_000
	if testing.Short() || raceEnabled {
		n = 100_000
	}
	for _, p := range []string{"lws", "eager"} {
		t.Run(p, func(t *testing.T) {
			ctx := testCtx(t)
			s := newSched(t, scheduler.WithPolicy(p), scheduler.WithWorkers(2))
			runs := make([]atomic.Int32, n)
			const nh = 8
			vals := make([]uint64, nh)
			hs := make([]*scheduler.Handle, nh)
			for i := range hs {
				hs[i], _ = s.RegisterValue(&vals[i])
			}
			mark := &scheduler.Codelet{Name: "mark", CPU: func(c *scheduler.Call) error {
				runs[c.Arg.(int)].Add(1)
				if c.Len() > 0 {
					*scheduler.ValueOf[*uint64](c, 0)++
				}
				return nil
			}}
			var sink atomic.Uint64
			read := &scheduler.Codelet{Name: "read", CPU: func(c *scheduler.Call) error {
				runs[c.Arg.(int)].Add(1)
				sink.Add(*scheduler.ValueOf[*uint64](c, 0))
				return nil
			}}
			var chained [2]int
			errc := make(chan error, 2)
			for g := 0; g < 2; g++ {
				go func(g int) {
					for i := g; i < n; i += 2 {
						var err error
						switch (i / 2) % 4 {
						case 0, 1:
							err = s.Submit(ctx, mark, scheduler.WithArg(i))
						case 2:
							chained[g]++
							err = s.Submit(ctx, mark, scheduler.WithArg(i), scheduler.RW(hs[g*4+(i/8)%4]))
						case 3:
							err = s.Submit(ctx, read, scheduler.WithArg(i), scheduler.R(hs[(i/8)%nh]))
						}
						if err != nil {
							errc <- err
							return
						}
					}
					errc <- nil
				}(g)
			}
			for g := 0; g < 2; g++ {
				select {
				case err := <-errc:
					require.NoError(t, err)
				case <-ctx.Done():
					t.Fatal("submitters timed out")
				}
			}
			require.NoError(t, s.WaitAll(ctx))
			for i := range runs {
				if got := runs[i].Load(); got != 1 {
					t.Fatalf("task %d ran %d times", i, got)
				}
			}
			var total uint64
			for i := range hs {
				v, err := hs[i].Unregister(ctx)
				require.NoError(t, err)
				total += *v.(*uint64)
			}
			// Readers do not write; RW tasks each add one.
			require.Equal(t, uint64(chained[0]+chained[1]), total)
		})
	}
}
