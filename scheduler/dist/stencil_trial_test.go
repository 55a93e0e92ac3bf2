package dist_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// Findings of a trial: a 2D Jacobi stencil over tiles of two grids,
// placed by a distribution function, with a Redux residual.

// bump adds one to every element of its one buffer.
var bump = &scheduler.Codelet{Name: "bump", CPU: func(c *scheduler.Call) error {
	x := scheduler.VectorOf[int64](c, 0)
	for i := range x {
		x[i]++
	}
	return nil
}}

// A rank whose context has ended gets an error from Submit naming the
// codelet where it stopped, also for a task that neither runs on it nor
// needs a transfer of its own (it returned nil there, and the rank went
// on submitting), and the other rank hears where it stopped.
func TestSubmitOnEndedContextStops(t *testing.T) {
	errs := make([]error, 2)
	err := runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
		hs, err := onePerRank[int64](d, 4)
		if err != nil {
			return err
		}
		sctx := ctx
		if d.Rank() == 1 {
			c, cancel := context.WithCancel(ctx)
			cancel()
			sctx = c
		}
		// Runs on rank 0 and reads nothing: rank 1 only records it.
		if errs[d.Rank()] = d.Submit(sctx, bump, dist.RW(hs[0])); errs[d.Rank()] != nil {
			return nil
		}
		errs[d.Rank()] = d.WaitAll(ctx)
		return nil
	})
	require.NoError(t, err)
	require.Error(t, errs[1], "rank 1's Submit on an ended context")
	require.ErrorIs(t, errs[1], context.Canceled)
	assert.Contains(t, errs[1].Error(), `rank 1 stopped submitting at "bump"`)
	require.ErrorIs(t, errs[0], dist.ErrRankFailed)
	assert.Contains(t, errs[0].Error(), `rank 1: stopped submitting at "bump": context canceled`)
}

// A cause given to the context is in Submit's error beside
// context.Canceled.
func TestSubmitOnEndedContextNamesTheCause(t *testing.T) {
	why := errors.New("input exhausted")
	err := runRanks(t, 1, func(ctx context.Context, d *dist.Scheduler) error {
		hs, err := onePerRank[int64](d, 4)
		if err != nil {
			return err
		}
		c, cancel := context.WithCancelCause(ctx)
		cancel(why)
		serr := d.Submit(c, bump, dist.RW(hs[0]))
		require.ErrorIs(t, serr, context.Canceled)
		require.ErrorIs(t, serr, why)
		assert.Contains(t, serr.Error(), `rank 0 stopped submitting at "bump"`)
		return nil
	})
	require.NoError(t, err)
}

// RegisterTiles names tile (i, j) "A(i,j)" with scheduler.Named("A"), so
// that two grids' tiles differ in errors and stall reports (both read
// "(i,j)" before), and "(i,j)" without a name.
func TestRegisterTilesNamed(t *testing.T) {
	err := runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
		a, err := dist.RegisterTiles[float64](d, 2, 2, 3, 3, dist.BlockCyclic2D(1, 2), nil, scheduler.Named("A"))
		if err != nil {
			return err
		}
		b, err := dist.RegisterTiles[float64](d, 2, 2, 3, 3, dist.BlockCyclic2D(1, 2), nil)
		if err != nil {
			return err
		}
		assert.Equal(t, `handle "A(1,0)" (#2, owner 0)`, a[1][0].String())
		assert.Equal(t, `handle "(0,1)" (#5, owner 1)`, b[0][1].String())
		return d.WaitAll(ctx)
	})
	require.NoError(t, err)
}

// A distribution that gives a tile to a rank that does not exist is
// refused before any tile is registered: the next registration gets
// number 0 (it got the number after the tiles before the bad one).
func TestRegisterTilesBadOwnerRegistersNothing(t *testing.T) {
	err := runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
		bad := dist.Func(func(i, j int) int { return i + j }) // tile (1, 1) on rank 2
		_, err := dist.RegisterTiles[float64](d, 2, 2, 3, 3, bad, nil)
		require.ErrorIs(t, err, dist.ErrBadRank)
		assert.Contains(t, err.Error(), "tile (1, 1) to rank 2 of 2")
		var mine []float64
		if d.Rank() == 0 {
			mine = make([]float64, 1)
		}
		h, err := dist.Register(d, 0, mine, 1, 1)
		if err != nil {
			return err
		}
		assert.Equal(t, 0, h.ID())
		return d.WaitAll(ctx)
	})
	require.NoError(t, err)
}

// Ranks that give a handle different reductions (SetReduction with
// codelets of other names) submit different graphs: the graph check
// names both. Each rank's partial result started from its own init and
// the writer folded them with its combine, and WaitAll returned nil
// with a mix of the two.
func TestGraphMismatchReduction(t *testing.T) {
	errs := make([]error, 2)
	err := runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
		var mine []int64
		if d.Rank() == 0 {
			mine = make([]int64, 1)
		}
		sum, err := dist.Register(d, 0, mine, 1, 1, scheduler.Named("sum"))
		if err != nil {
			return err
		}
		zero := &scheduler.Codelet{Name: "zero", CPU: func(c *scheduler.Call) error {
			scheduler.VectorOf[int64](c, 0)[0] = 0
			return nil
		}}
		combine := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
			scheduler.VectorOf[int64](c, 0)[0] += scheduler.VectorOf[int64](c, 1)[0]
			return nil
		}}
		if d.Rank() == 1 {
			combine = &scheduler.Codelet{Name: "max", CPU: func(c *scheduler.Call) error {
				x := scheduler.VectorOf[int64](c, 0)
				x[0] = max(x[0], scheduler.VectorOf[int64](c, 1)[0])
				return nil
			}}
		}
		if err := sum.SetReduction(zero, combine); err != nil {
			return err
		}
		for r := range d.Size() {
			if err := d.Submit(ctx, bump, dist.Redux(sum), dist.OnRank(r)); err != nil {
				return err
			}
		}
		errs[d.Rank()] = d.WaitAll(ctx)
		return nil
	})
	require.NoError(t, err)
	for r, e := range errs {
		require.ErrorIs(t, e, dist.ErrGraphMismatch, "rank %d", r)
		assert.Contains(t, e.Error(), `Redux(#0 "sum" owner 0, 1 x 1 int64, reduction zero/add)`, "rank %d", r)
		assert.Contains(t, e.Error(), `Redux(#0 "sum" owner 0, 1 x 1 int64, reduction zero/max)`, "rank %d", r)
	}
}

// A leading dimension other than the column count is refused on every
// rank alike: a distributed handle moves as one contiguous block. Before,
// only the owner failed (its local registration), while the other ranks'
// Register succeeded and they learnt of it later, through the failed
// graph. LD equal to the columns is no change, and is accepted.
func TestRegisterRefusesLD(t *testing.T) {
	err := runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
		var mine []float64
		if d.Rank() == 0 {
			mine = []float64{1, 2, 3, 4}
		}
		_, err := dist.Register(d, 0, mine, 2, 2, scheduler.LD(3))
		require.ErrorIs(t, err, comm.ErrInvalidArg, "rank %d", d.Rank())
		assert.Contains(t, err.Error(), "scheduler.LD(3) for 2 columns: a distributed handle is contiguous")
		_, err = dist.RegisterTiles[float64](d, 2, 2, 3, 3, dist.BlockCyclic2D(1, 2), nil, scheduler.LD(4))
		require.ErrorIs(t, err, comm.ErrInvalidArg, "rank %d", d.Rank())
		h, err := dist.Register(d, 0, mine, 2, 2, scheduler.LD(2))
		if err != nil {
			return err
		}
		assert.Equal(t, 0, h.ID(), "nothing registered before")
		return d.WaitAll(ctx)
	})
	require.NoError(t, err)
}
