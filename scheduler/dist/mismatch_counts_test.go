package dist_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// A graph mismatch counts one handle or one submission in the singular.
// Found by a new-user trial (helper-131): 'rank 0 has registered 1
// handles, rank 1 2' and 'rank 0 is in WaitAll after 1 submissions'.
func TestMismatchCountsOne(t *testing.T) {
	nop := &scheduler.Codelet{Name: "nop", CPU: func(*scheduler.Call) error { return nil }}
	run := func(t *testing.T, extra bool, tasks func(rank int) int) []error {
		errs := make([]error, 2)
		require.NoError(t, runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
			if extra && d.Rank() == 1 {
				if _, err := dist.Register[float64](d, 0, nil, 1, 1, scheduler.Named("extra")); err != nil {
					return err
				}
			}
			var mem []float64
			if d.Rank() == 0 {
				mem = make([]float64, 1)
			}
			h, err := dist.Register(d, 0, mem, 1, 1, scheduler.Named("h"))
			if err != nil {
				return err
			}
			for range tasks(d.Rank()) {
				if err := d.Submit(ctx, nop, dist.RW(h)); err != nil {
					errs[d.Rank()] = err
					return nil
				}
			}
			errs[d.Rank()] = d.WaitAll(ctx)
			return nil
		}))
		return errs
	}
	t.Run("handles", func(t *testing.T) {
		errs := run(t, true, func(int) int { return 1 })
		for r, e := range errs {
			require.ErrorIs(t, e, dist.ErrGraphMismatch, "rank %d", r)
			assert.Contains(t, e.Error(), "rank 0 has registered 1 handle, rank 1 2:", "rank %d", r)
		}
	})
	t.Run("submissions", func(t *testing.T) {
		errs := run(t, false, func(rank int) int { return 1 + rank })
		for r, e := range errs {
			require.ErrorIs(t, e, dist.ErrGraphMismatch, "rank %d", r)
			assert.Contains(t, e.Error(), "rank 0 is in WaitAll after 1 submission;", "rank %d", r)
		}
	})
}
