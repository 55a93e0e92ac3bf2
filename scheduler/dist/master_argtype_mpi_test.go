//go:build mpi

package dist_test

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMPIMasterArgTypes is TestMasterArgTypes under mpirun -n 2: every
// case's argument crosses to rank 1's process, whose codelet asserts its
// Go type.
func TestMPIMasterArgTypes(t *testing.T) {
	ctx, w := onTwoMPIRanks(t, "TestMPIMasterArgTypes")
	if w == nil {
		return
	}
	ran := make([]atomic.Int64, 2)
	require.NoError(t, runArgCases(ctx, w, ran))
	if w.Rank() == 1 {
		assert.Equal(t, int64(len(argCases())), ran[1].Load(), "tasks run on rank 1")
	} else {
		assert.Equal(t, int64(0), ran[0].Load(), "tasks ran on the master's cores")
	}
}
