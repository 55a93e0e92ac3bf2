package scheduler_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestPooledTasksKeepOrder submits a seeded random sequence of R, RW and
// W accesses (Submit reuses its tasks once nothing refers to them) on a
// few handles, with a partition and unpartition in the middle, and
// checks every value read and written against the sequential execution:
// a task reused while a handle still listed it would wire a wrong
// dependency and show here.
func TestPooledTasksKeepOrder(t *testing.T) {
	ctx := testCtx(t)
	for _, pol := range []string{"lws", "eager", "dmda"} {
		t.Run(pol, func(t *testing.T) {
			s := newSched(t, scheduler.WithWorkers(2), scheduler.WithPolicy(pol))
			const nh, n = 4, 4000
			vals := make([]uint64, nh)
			hs := make([]*scheduler.Handle, nh)
			for i := range hs {
				var err error
				hs[i], err = s.RegisterVector(vals[i : i+1])
				require.NoError(t, err)
			}
			step := &scheduler.Codelet{Name: "step", CPU: func(c *scheduler.Call) error {
				v := scheduler.VectorOf[uint64](c, 0)
				v[0] = v[0]*3 + c.Arg.(uint64)
				return nil
			}}
			set := &scheduler.Codelet{Name: "set", CPU: func(c *scheduler.Call) error {
				scheduler.VectorOf[uint64](c, 0)[0] = c.Arg.(uint64)
				return nil
			}}
			seen := make([]uint64, n)
			read := &scheduler.Codelet{Name: "read", CPU: func(c *scheduler.Call) error {
				seen[c.Arg.(int)] = scheduler.VectorOf[uint64](c, 0)[0]
				return nil
			}}
			want := make([]uint64, nh)
			wantSeen := make([]uint64, n)
			rng := rand.New(rand.NewPCG(3, 5))
			for i := 0; i < n; i++ {
				k := rng.IntN(nh)
				switch op := rng.IntN(5); {
				case op < 2:
					require.NoError(t, s.Submit(ctx, read, scheduler.R(hs[k]), scheduler.WithArg(i)))
					wantSeen[i] = want[k]
				case op < 4:
					a := uint64(i)
					require.NoError(t, s.Submit(ctx, step, scheduler.RW(hs[k]), scheduler.WithArg(a)))
					want[k] = want[k]*3 + a
				default:
					require.NoError(t, s.Submit(ctx, set, scheduler.W(hs[k]), scheduler.WithArg(uint64(i))))
					want[k] = uint64(i)
				}
				if i == n/2 {
					// Access lists move to tiles and back.
					tiles, err := hs[0].Partition(scheduler.Blocks(1, 1))
					require.NoError(t, err)
					require.NoError(t, s.Submit(ctx, step, scheduler.RW(tiles[0][0]), scheduler.WithArg(uint64(7))))
					want[0] = want[0]*3 + 7
					require.NoError(t, hs[0].Unpartition())
				}
			}
			require.NoError(t, s.WaitAll(ctx))
			require.Equal(t, want, vals)
			require.Equal(t, wantSeen, seen)
		})
	}
}
