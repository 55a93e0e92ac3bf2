//go:build mpi

package dist_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm/mpi"
	"github.com/pzgo/pz/internal/launch"
)

// TestMPIMasterDMDATransferHeavy is TestMasterDMDATransferHeavy on 3 MPI
// ranks: outside mpirun it starts itself under mpirun (skipped without
// it); under mpirun it is one rank of the job, and the master checks
// that the transfer-heavy tasks stayed on its cores in the second run.
func TestMPIMasterDMDATransferHeavy(t *testing.T) {
	if !launch.Detect(os.Getenv).Launched() {
		runUnderMPI(t, "TestMPIMasterDMDATransferHeavy", 3, 3*time.Minute)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, err := mpi.Init(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, w.Finalize()) }()
	dir := t.TempDir()
	touch := mwTouch()
	per := make([]int64, w.Size())
	require.NoError(t, dmdaMaster(ctx, w, dir, touch, submitTouches(touch), per))
	clear(per)
	require.NoError(t, dmdaMaster(ctx, w, dir, touch, submitTouches(touch), per))
	if w.Rank() == 0 {
		checkTransferHeavy(t, per)
	}
}
