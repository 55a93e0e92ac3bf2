//go:build mpi

package dist_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// TestMPICollectiveWhileOthersSubmit is TestCollectiveWhileOthersSubmit
// under MPI: rank 0 gathers the matrix while rank 1 goes on submitting;
// both get ErrGraphMismatch naming GatherMatrix instead of waiting for
// each other until the test's deadline.
func TestMPICollectiveWhileOthersSubmit(t *testing.T) {
	ctx, w := onTwoMPIRanks(t, "TestMPICollectiveWhileOthersSubmit")
	if w == nil {
		return
	}
	d := oneWorkerDist(t, ctx, w) // no stall timeout: only ctx would end the wait
	defer d.Close()
	tiles, err := dist.RegisterTiles[float64](d, 1, 2, 2, 2, dist.BlockCyclic2D(1, 2), nil)
	require.NoError(t, err)
	step := &scheduler.Codelet{Name: "step", CPU: func(c *scheduler.Call) error {
		scheduler.VectorOf[float64](c, 0)[0]++
		return nil
	}}
	steps := 10
	if w.Rank() == 1 {
		steps += 3 * 64
	}
	for s := range steps {
		if err = d.Submit(ctx, step, dist.RW(tiles[0][s%2])); err != nil {
			break
		}
	}
	if err == nil && w.Rank() == 0 {
		err = dist.GatherMatrix(ctx, d, 0, make([]float64, 8), 2, 4, tiles)
	}
	if err == nil {
		err = d.WaitAll(ctx)
	}
	require.ErrorIs(t, err, dist.ErrGraphMismatch)
	assert.ErrorContains(t, err, `rank 0 made submission #10: codelet "dist.GatherMatrix"; rank 1 made submission #10: codelet "step"`)
	assert.NoError(t, ctx.Err(), "the ranks waited for each other until the deadline")
}
