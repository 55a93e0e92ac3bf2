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
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// TestMPICloseReportsUnreportedFailure is TestCloseReportsUnreportedFailure
// under mpirun, on 1 to 3 ranks (distUnderMPI's Close must return nil,
// so this test sets up its own scheduler).
func TestMPICloseReportsUnreportedFailure(t *testing.T) {
	const name = "TestMPICloseReportsUnreportedFailure"
	if !launch.Detect(os.Getenv).Launched() {
		for n := 1; n <= 3; n++ {
			runUnderMPI(t, name, n, 2*time.Minute)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := mpi.Init(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, w.Finalize()) })
	ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
	require.NoError(t, err)
	defer ls.Close()
	d, err := dist.New(ctx, w, ls)
	require.NoError(t, err)
	require.NoError(t, closeAfterUnreportedFailure(ctx, d, w.Barrier))
}
