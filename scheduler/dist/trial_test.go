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

// After rank 1 left WaitAll (its context was canceled), later WaitAll
// calls on each rank return the failure naming the rank that left: rank
// 1 on rank 0 (they said "rank 0 left WaitAll" there), and on rank 1 that
// it left.
func TestLaterWaitAllNamesWhoLeft(t *testing.T) {
	const later = 3
	first := make([]error, 2)
	again := make([][]error, 2)
	submitted := make(chan struct{}) // rank 0 submitted the graph
	err := runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
		hs, err := onePerRank[int64](d, 4)
		if err != nil {
			return err
		}
		for i := range 10 {
			if err := d.Submit(ctx, apply, dist.R(hs[i%2]), dist.RW(hs[(i+1)%2]), dist.With(scheduler.WithArg(op{mode: scheduler.ModeRW, onRank: -1}))); err != nil {
				return err
			}
		}
		wctx := ctx
		if d.Rank() == 0 {
			close(submitted)
		} else {
			// It leaves once rank 0 is done submitting (else rank 0's
			// Submit reports it instead of its WaitAll).
			<-submitted
			c, cancel := context.WithCancel(ctx)
			cancel()
			wctx = c
		}
		first[d.Rank()] = d.WaitAll(wctx)
		// Rank 0 may leave its first or its second WaitAll on hearing
		// of rank 1 (the comparison it would start next is ruled out):
		// each later one says the same.
		for range later {
			again[d.Rank()] = append(again[d.Rank()], d.WaitAll(ctx))
		}
		return nil
	})
	require.NoError(t, err)
	require.ErrorIs(t, first[1], context.Canceled)
	require.ErrorIs(t, first[0], dist.ErrRankFailed)
	assert.Contains(t, first[0].Error(), "rank 1 left WaitAll")
	for i := range later {
		e0, e1 := again[0][i], again[1][i]
		require.ErrorIs(t, e0, dist.ErrRankFailed, "rank 0, WaitAll %d", i+2)
		assert.Contains(t, e0.Error(), "rank 1 left WaitAll", "rank 0, WaitAll %d", i+2)
		assert.NotContains(t, e0.Error(), "rank 0 left", "rank 0, WaitAll %d", i+2)
		assert.NotContains(t, e0.Error(), "this rank", "rank 0, WaitAll %d", i+2)

		require.ErrorIs(t, e1, context.Canceled, "rank 1, WaitAll %d", i+2)
		assert.Contains(t, e1.Error(), "the graph failed when this rank (rank 1) left an earlier WaitAll", "rank 1, WaitAll %d", i+2)
	}
}
