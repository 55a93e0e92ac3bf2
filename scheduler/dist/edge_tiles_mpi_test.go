//go:build mpi

package dist_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// TestMPIRegisterMatrixTiles is TestRegisterMatrixTiles under real MPI,
// on 1 to 4 ranks, and checks that a root outside the ranks passed by
// the last rank only gets the same error on every rank from
// ScatterMatrix and Scatter (TestRootOutOfRangeOnOneRank): outside
// mpirun it starts itself with mpirun (and skips without mpirun); under
// mpirun it is one rank of the job.
func TestMPIRegisterMatrixTiles(t *testing.T) {
	ctx, w, d, ok := distUnderMPI(t, "TestMPIRegisterMatrixTiles", 2*time.Minute, time.Minute)
	if !ok {
		return
	}
	for _, c := range edgeCases {
		_, nt := c.grid()
		for _, dd := range rectDists(nt, w.Size()) {
			require.NoError(t, edgeRoundTrip(ctx, d, c, dd.dist), "%s, %s, rank %d", c.name, dd.name, w.Rank())
		}
	}
	if w.Size() == 1 {
		return // no other rank to disagree with
	}

	tiles, err := dist.RegisterMatrixTiles[float64](d, 5, 4, 2, 3, dist.Cyclic1D(2, w.Size()), nil, scheduler.Named("R"))
	require.NoError(t, err)
	last := w.Size() - 1
	root := 0
	if w.Rank() == last {
		root = w.Size() + 2 // not a rank
	}
	a := make([]float64, 5*4)
	nop := func(int, any) error { return nil }
	// In one order on every rank: the check below is a collective.
	for _, x := range []struct {
		call string
		err  error
	}{
		{"ScatterMatrix", dist.ScatterMatrix(ctx, d, root, a, 5, 4, tiles)},
		{"Scatter", d.Scatter(ctx, root, []*dist.Handle{tiles[0][0], tiles[2][1]}, nop)},
	} {
		call, err := x.call, x.err
		require.ErrorIs(t, err, comm.ErrMismatch, "%s, rank %d", call, w.Rank())
		assert.Contains(t, err.Error(), fmt.Sprintf("(rank %d's root %d is not a rank of %d)", last, w.Size()+2, w.Size()), "%s, rank %d", call, w.Rank())
		all, aerr := comm.AllGatherValues(ctx, w, err.Error())
		require.NoError(t, aerr)
		for r, e := range all {
			assert.Equal(t, all[0], e, "%s: rank %d's error differs from rank 0's", call, r)
		}
	}
	require.NoError(t, d.WaitAll(ctx)) // nothing was submitted
}
