package dist_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
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

// submitPingPong submits ten tasks that read one rank's handle and write
// the other's, in turn: a graph whose tasks wait for transfers both ways.
func submitPingPong(ctx context.Context, d *dist.Scheduler) error {
	hs, err := onePerRank[int64](d, 4)
	if err != nil {
		return err
	}
	for i := range 10 {
		if err := d.Submit(ctx, apply, dist.R(hs[i%2]), dist.RW(hs[(i+1)%2]), dist.With(scheduler.WithArg(op{mode: scheduler.ModeRW, onRank: -1}))); err != nil {
			return err
		}
	}
	return nil
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
		if err := submitPingPong(ctx, d); err != nil {
			return err
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

// A rank whose context ends once the graphs are compared and its tasks
// have completed, just before the agreement on the outcome, leaves
// WaitAll, and the others hear that it left. (It entered the agreement,
// a collective, with the ended context and abandoned it: the
// communicator broken without a word of why - a CI failure of
// TestLaterWaitAllNamesWhoLeft, whose rank 1 called WaitAll canceled
// after rank 0 had joined the comparison, which then completed.)
func TestWaitAllCanceledBeforeTheAgreementLeaves(t *testing.T) {
	first := make([]error, 2)
	err := runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
		if err := submitPingPong(ctx, d); err != nil {
			return err
		}
		wctx := ctx
		if d.Rank() == 1 {
			c, cancel := context.WithCancel(ctx)
			dist.BeforeAgreement(d, cancel)
			wctx = c
		}
		first[d.Rank()] = d.WaitAll(wctx)
		return nil
	})
	require.NoError(t, err)
	require.ErrorIs(t, first[1], context.Canceled)
	require.ErrorIs(t, first[0], dist.ErrRankFailed)
	assert.Contains(t, first[0].Error(), "rank 1 left WaitAll")
	assert.NotContains(t, first[0].Error(), "abandoned")
}

// Ranks that end a window at different points of their submissions are
// told what the shorter rank did instead of a submission: its program
// called WaitAll after so many submissions, or it stopped (returned or
// closed; Close waits for the graph) after so many.
func TestGraphMismatchSaysWhereARankStopped(t *testing.T) {
	for _, tc := range []struct {
		name  string
		close bool // rank 1 closes after its submissions, rank 0 calls WaitAll
		at    int  // where the shorter rank stops
		want  []string
	}{
		{"WaitAll early", false, 50, []string{
			"rank 0 is in WaitAll after 50 submissions",
			`rank 1 made submission #50: codelet "apply"`,
		}},
		{"closed early", true, 10, []string{
			`rank 0 made submission #10: codelet "apply"`,
			"rank 1 stopped after 10 submissions (it returned or closed without WaitAll",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := make([]error, 2)
			err := runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
				hs, err := onePerRank[int64](d, 4)
				if err != nil {
					return err
				}
				short := (d.Rank() == 0) != tc.close // the rank that stops early
				for i := range 100 {
					if short && i == tc.at {
						break
					}
					if err := d.Submit(ctx, apply, dist.R(hs[i%2]), dist.RW(hs[(i+1)%2]), dist.With(scheduler.WithArg(op{mode: scheduler.ModeRW, onRank: -1}))); err != nil {
						errs[d.Rank()] = err
						return nil
					}
				}
				if short && tc.close {
					errs[d.Rank()] = d.Close()
					return nil
				}
				errs[d.Rank()] = d.WaitAll(ctx)
				return nil
			})
			require.NoError(t, err)
			for r, e := range errs {
				t.Logf("rank %d: %v", r, e)
				require.ErrorIs(t, e, dist.ErrGraphMismatch, "rank %d", r)
				for _, w := range tc.want {
					assert.Contains(t, e.Error(), w, "rank %d", r)
				}
				assert.NotContains(t, e.Error(), "(no submission)", "rank %d", r)
				assert.NotContains(t, e.Error(), "registered", "rank %d: the ranks registered the same handles", r)
			}
		})
	}
}

// A handle registered on some ranks only parts the handles' numbers:
// the mismatch it causes says how many handles each rank registered and
// that every rank registers the same ones in the same order.
func TestGraphMismatchNamesRegistrationCounts(t *testing.T) {
	noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
	errs := make([]error, 3)
	err := runRanks(t, 3, func(ctx context.Context, d *dist.Scheduler) error {
		n := 8
		if d.Rank() == 1 {
			n = 7 // it forgot one
		}
		var last *dist.Handle
		for range n {
			var data []int64
			if d.Rank() == 0 {
				data = make([]int64, 4)
			}
			var err error
			if last, err = dist.Register(d, 0, data, 4, 1); err != nil {
				return err
			}
		}
		if err := d.Submit(ctx, noop, dist.RW(last)); err != nil {
			errs[d.Rank()] = err
			return nil
		}
		errs[d.Rank()] = d.WaitAll(ctx)
		return nil
	})
	require.NoError(t, err)
	for r, e := range errs {
		t.Logf("rank %d: %v", r, e)
		require.ErrorIs(t, e, dist.ErrGraphMismatch, "rank %d", r)
		assert.Contains(t, e.Error(), "RW(#7 owner 0", "rank %d", r)
		assert.Contains(t, e.Error(), "RW(#6 owner 0", "rank %d", r)
		assert.Contains(t, e.Error(), "rank 0 has registered 8 handles, rank 1 7: every rank registers the same handles in the same order", "rank %d", r)
		assert.NotContains(t, e.Error(), "rank 2 8", "rank %d", r)
	}
}

// RegisterTiles refuses a Cyclic1D made for another number of tile
// columns than the grid's (its owners would follow another grid's
// order), naming both numbers and the fix, and registers nothing: the
// graph goes on.
func TestRegisterTilesCyclic1DColumns(t *testing.T) {
	err := runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
		_, err := dist.RegisterTiles[float64](d, 2, 4, 1, 1, dist.Cyclic1D(3, 2), nil)
		if !errors.Is(err, dist.ErrDistribution) || !contains(err, "Cyclic1D(3, 2) deals tiles over 3 tile columns, but the grid has 4 (2 x 4 tiles): pass Cyclic1D(4, 2)") {
			return fmt.Errorf("Cyclic1D(3, 2) on a 2 x 4 grid: %v", err)
		}
		tiles, err := dist.RegisterTiles[float64](d, 2, 4, 1, 1, dist.Cyclic1D(4, 2), nil)
		if err != nil {
			return err
		}
		for i := range tiles {
			for j, h := range tiles[i] {
				if want := (i*4 + j) % 2; h.Owner() != want {
					return fmt.Errorf("tile (%d, %d): owner %d, want %d", i, j, h.Owner(), want)
				}
			}
		}
		if tiles[0][0].ID() != 0 {
			return fmt.Errorf("the refused call registered handles: the first tile is #%d", tiles[0][0].ID())
		}
		return d.WaitAll(ctx)
	})
	require.NoError(t, err)
}

// After a failed graph the ranks go on with a new distributed scheduler
// on the same communicator and local scheduler (as docs/distributed.md
// says): every rank closes the failed one and calls New at the same
// point, registers new handles, and the new graph completes. The failed
// scheduler's handles are refused by the new one (ErrForeignHandle).
func TestNewSchedulerAfterFailedGraph(t *testing.T) {
	boom := &scheduler.Codelet{Name: "boom", CPU: func(*scheduler.Call) error { return errors.New("kaboom") }}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		ls, err := scheduler.New(ctx, scheduler.WithWorkers(2))
		if err != nil {
			return err
		}
		defer ls.Close()
		d, err := dist.New(ctx, c, ls)
		if err != nil {
			return err
		}
		defer d.Close()
		old, err := onePerRank[int64](d, 4)
		if err != nil {
			return err
		}
		if err := d.Submit(ctx, boom, dist.RW(old[1])); err != nil {
			return err
		}
		if err := d.WaitAll(ctx); !errors.Is(err, dist.ErrRankFailed) || !contains(err, "kaboom") {
			return fmt.Errorf("the failed graph's WaitAll: %v", err)
		}
		if err := d.Submit(ctx, apply, dist.RW(old[0])); !errors.Is(err, dist.ErrRankFailed) {
			return fmt.Errorf("Submit on the failed scheduler: %v", err)
		}
		if err := d.Close(); err != nil {
			return fmt.Errorf("closing the failed scheduler: %w", err)
		}
		d2, err := dist.New(ctx, c, ls)
		if err != nil {
			return err
		}
		defer d2.Close()
		if err := d2.Submit(ctx, apply, dist.RW(old[0])); !errors.Is(err, dist.ErrForeignHandle) {
			return fmt.Errorf("an old handle on the new scheduler: %v", err)
		}
		hs, err := onePerRank[int64](d2, 4)
		if err != nil {
			return err
		}
		if err := d2.Submit(ctx, apply, dist.RW(hs[0]), dist.R(hs[1]), dist.With(scheduler.WithArg(op{mode: scheduler.ModeRW, onRank: -1, add: 1}))); err != nil {
			return err
		}
		if err := d2.WaitAll(ctx); err != nil {
			return fmt.Errorf("the new graph: %w", err)
		}
		if d2.Rank() == 0 {
			if got := hs[0].Data().([]int64); got[0] != 1 {
				return fmt.Errorf("the new graph's result: %v, want 1 in front", got)
			}
		}
		return nil
	})
	require.NoError(t, err)
}
