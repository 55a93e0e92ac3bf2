//go:build mpi

package dist_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMPICloseReportsUnreportedFailure is TestCloseReportsUnreportedFailure
// under mpirun, on 1 to 3 ranks (distUnderMPI's Close must return nil,
// so this test sets up its own scheduler).
func TestMPICloseReportsUnreportedFailure(t *testing.T) {
	ctx, w := onMPIRanks(t, "TestMPICloseReportsUnreportedFailure", []int{1, 2, 3}, 2*time.Minute, time.Minute)
	if w == nil {
		return
	}
	d := oneWorkerDist(t, ctx, w)
	require.NoError(t, closeAfterUnreportedFailure(ctx, d, w.Barrier))
}
