package dist_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// A nil codelet is refused on every rank that passes it, as a nil handle
// is, with comm.ErrInvalidArg naming it, instead of a nil dereference;
// ranks that all did the same still submit one graph, which completes.
func TestSubmitNilCodelet(t *testing.T) {
	errs := make([]error, 2)
	err := runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
		hs, err := onePerRank[int64](d, 4)
		if err != nil {
			return err
		}
		errs[d.Rank()] = d.Submit(ctx, nil, dist.R(hs[0]), dist.RW(hs[1]))
		if err := d.Submit(ctx, apply, dist.R(hs[0]), dist.RW(hs[1]), dist.With(scheduler.WithArg(op{mode: scheduler.ModeRW, onRank: -1}))); err != nil {
			return fmt.Errorf("a submission after the refused one: %w", err)
		}
		return d.WaitAll(ctx)
	})
	require.NoError(t, err)
	for r, e := range errs {
		require.ErrorIs(t, e, comm.ErrInvalidArg, "rank %d", r)
		assert.Contains(t, e.Error(), "nil codelet", "rank %d", r)
		assert.False(t, errors.Is(e, dist.ErrRankFailed), "rank %d: %v", r, e)
	}
}
