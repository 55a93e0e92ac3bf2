//go:build mpi

package dist_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/scheduler/dist"
)

// TestMPIScatterGatherRectangular is TestScatterGatherRectangular under
// real MPI, on 1 to 4 ranks, and checks that a bad size and ranks that
// disagree on the size get the same error on every rank: outside mpirun
// it starts itself with mpirun (and skips without mpirun); under mpirun
// it is one rank of the job.
func TestMPIScatterGatherRectangular(t *testing.T) {
	ctx, w, d, ok := distUnderMPI(t, "TestMPIScatterGatherRectangular", 2*time.Minute, time.Minute)
	if !ok {
		return
	}
	for _, c := range rectCases {
		_, nt := c.grid()
		for _, dd := range rectDists(nt, w.Size()) {
			require.NoError(t, rectRoundTrip(ctx, d, c, dd.dist), "%s, %s, rank %d", c.name, dd.name, w.Rank())
		}
	}

	// A 2 x 3 grid of 3 x 4 tiles is a 6 x 12 matrix.
	tiles, err := dist.RegisterTiles[float64](d, 2, 3, 3, 4, dist.Cyclic1D(3, w.Size()), nil)
	require.NoError(t, err)
	var a []float64
	if w.Rank() == 0 {
		a = make([]float64, 7*12)
	}
	last := w.Size() - 1
	for _, tc := range []struct {
		name     string
		lastCols int // the last rank's cols
		is       error
		want     string
	}{
		{"rows not spanned", 12, comm.ErrInvalidArg, "2 rows of tiles at most 3 rows high cover 4 to 6 rows, not the 7 of the 7 x 12 matrix"},
		{"the last rank's cols differ", 13, comm.ErrMismatch, fmt.Sprintf("rank 0 passed root 0 and a 7 x 12 matrix, rank %d root 0 and a 7 x 13 one", last)},
	} {
		if tc.lastCols != 12 && w.Size() == 1 {
			continue // no other rank to disagree with
		}
		cols := 12
		if w.Rank() == last {
			cols = tc.lastCols
		}
		err := dist.ScatterMatrix(ctx, d, 0, a, 7, cols, tiles)
		require.ErrorIs(t, err, tc.is, "%s, rank %d", tc.name, w.Rank())
		assert.Contains(t, err.Error(), tc.want, "%s, rank %d", tc.name, w.Rank())
		all, aerr := comm.AllGatherValues(ctx, w, err.Error())
		require.NoError(t, aerr)
		for r, e := range all {
			assert.Equal(t, all[0], e, "%s: rank %d's error differs from rank 0's", tc.name, r)
		}
	}
	require.NoError(t, d.WaitAll(ctx)) // nothing was submitted
}
