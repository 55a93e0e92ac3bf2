//go:build mpi

package dist_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMPIMasterDMDATransferHeavy is TestMasterDMDATransferHeavy on 3 MPI
// ranks: outside mpirun it starts itself under mpirun (skipped without
// it); under mpirun it is one rank of the job, and the master checks
// that the transfer-heavy tasks stayed on its cores, its model written
// beforehand (writeTouchModel, on every rank: each has its own dir).
func TestMPIMasterDMDATransferHeavy(t *testing.T) {
	ctx, w := onMPIRanks(t, "TestMPIMasterDMDATransferHeavy", []int{3}, 3*time.Minute, 2*time.Minute)
	if w == nil {
		return
	}
	dir := t.TempDir()
	touch := mwTouch()
	writeTouchModel(t, dir, touch)
	per := make([]int64, w.Size())
	require.NoError(t, dmdaMaster(ctx, w, dir, touch, submitTouches(touch), per))
	if w.Rank() == 0 {
		checkTransferHeavy(t, per)
	}
}
