//go:build mpi

package dist_test

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMPIMasterArgInterfaces is TestMasterArgInterfaces under mpirun
// -n 2: arguments holding interface values cross to rank 1's process,
// whose codelets assert the dynamic Go type of each; arguments holding
// an unregistered type are refused at Submit.
func TestMPIMasterArgInterfaces(t *testing.T) {
	ctx, w := onTwoMPIRanks(t, "TestMPIMasterArgInterfaces")
	if w == nil {
		return
	}
	ran := make([]atomic.Int64, 2)
	require.NoError(t, runIfaceCases(ctx, w, ran))
	if w.Rank() == 1 {
		assert.Equal(t, int64(len(ifaceCases())), ran[1].Load(), "tasks run on rank 1")
	} else {
		assert.Equal(t, int64(0), ran[0].Load(), "tasks ran on the master's cores")
	}
}
