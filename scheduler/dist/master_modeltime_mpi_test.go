//go:build mpi

package dist_test

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMPIMasterModelTime is TestMasterModelTime under mpirun -n 2: rank
// 1's process reports each task's compute time, which the master's model
// holds, not the round trip over MPI with the 32 MiB vector's transfers.
func TestMPIMasterModelTime(t *testing.T) {
	ctx, w := onTwoMPIRanks(t, "TestMPIMasterModelTime")
	if w == nil {
		return
	}
	var res modelTimeResult
	var computed atomic.Int64
	require.NoError(t, runModelTime(ctx, w, t.TempDir(), &res, &computed))
	if w.Rank() == 0 {
		checkModelTime(t, res)
		assert.Zero(t, computed.Load(), "the master's cores ran tasks")
	} else {
		assert.GreaterOrEqual(t, computed.Load(), int64(modelTimeTasks*modelTimeSleep), "rank 1 ran every task")
	}
}
