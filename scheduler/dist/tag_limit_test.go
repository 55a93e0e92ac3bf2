package dist_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// TestHandleLimitCoversPartials: with room for limit handle numbers
// (dist.SetTagLimit, rather than 2^28 registrations), Register allows
// limit handles and refuses the next, naming limit (it named limit-1);
// a reduction's partial result takes a number too, and a Submit whose
// Redux would need one past the limit is refused on every rank with
// comm.ErrInvalidArg naming the limit. Before, the partial took the
// number anyway: at the real limit its transfers used the trace clock's
// reserved tag, and the next partial a tag past MPICH's. A Redux that
// needs no new partial (on the writer, or a partial made before) still
// runs, and the graph completes with the right sum. On 2 in-process
// ranks.
func TestHandleLimitCoversPartials(t *testing.T) {
	for _, limit := range []int{3, 4} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			regErr, reduxErr, waitErr := make([]error, 2), make([]error, 2), make([]error, 2)
			got := make([]int64, 2)
			err := runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
				dist.SetTagLimit(d, limit)
				hs := make([]*dist.Handle, 3)
				for i := range hs {
					var data []int64
					if d.Rank() == 0 {
						data = []int64{1, 1}
					}
					var err error
					if hs[i], err = dist.Register(d, 0, data, 2, 1); err != nil {
						return fmt.Errorf("handle %d of %d: %w", i, limit, err)
					}
				}
				if err := hs[0].SetReduction(zero, add); err != nil {
					return err
				}
				inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
					x := scheduler.VectorOf[int64](c, 0)
					for i := range x {
						x[i]++
					}
					return nil
				}}
				// On the writer: no partial.
				if err := d.Submit(ctx, inc, dist.Redux(hs[0]), dist.OnRank(0)); err != nil {
					return fmt.Errorf("Redux on the writer: %w", err)
				}
				// On rank 1: its partial takes number 3.
				reduxErr[d.Rank()] = d.Submit(ctx, inc, dist.Redux(hs[0]), dist.OnRank(1))
				if reduxErr[d.Rank()] == nil {
					// The partial made, a second contribution needs none.
					if err := d.Submit(ctx, inc, dist.Redux(hs[0]), dist.OnRank(1)); err != nil {
						return fmt.Errorf("a second Redux on rank 1: %w", err)
					}
				}
				var data []int64
				if d.Rank() == 0 {
					data = []int64{0, 0}
				}
				_, regErr[d.Rank()] = dist.Register(d, 0, data, 2, 1)
				waitErr[d.Rank()] = d.WaitAll(ctx)
				if d.Rank() == 0 {
					got[0] = hs[0].Data().([]int64)[0]
				}
				return nil
			})
			require.NoError(t, err)
			for r := range 2 {
				assert.ErrorIs(t, regErr[r], comm.ErrInvalidArg, "rank %d's Register past the limit", r)
				assert.ErrorContains(t, regErr[r], fmt.Sprintf("more than %d handles registered", limit), "rank %d", r)
				assert.NoError(t, waitErr[r], "rank %d's WaitAll", r)
				if limit == 3 {
					assert.ErrorIs(t, reduxErr[r], comm.ErrInvalidArg, "rank %d's Redux that needs a partial past the limit", r)
					assert.ErrorContains(t, reduxErr[r], "and 3 of the 3 handle numbers are taken", "rank %d", r)
				} else {
					assert.NoError(t, reduxErr[r], "rank %d's Redux whose partial fits", r)
				}
			}
			want := int64(2) // 1, and the writer's contribution
			if limit == 4 {
				want = 4 // and rank 1's two
			}
			assert.Equal(t, want, got[0], "rank 0's reduced value")
		})
	}
}
