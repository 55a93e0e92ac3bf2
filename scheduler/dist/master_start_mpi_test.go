//go:build mpi

package dist_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// TestMPIMasterStartFailureStopsWorkers is TestMasterStartFailureStopsWorkers
// under mpirun -n 3, the master's context ending before rank 1's fifth
// ping (its first large one): rank 1 waits in the middle of its pings,
// rank 2 for its first. Before, both waited in echoPings until their own
// context ended (here a 30 s deadline; for ever with context.Background).
func TestMPIMasterStartFailureStopsWorkers(t *testing.T) {
	ctx, w := onMPIRanks(t, "TestMPIMasterStartFailureStopsWorkers", []int{3}, 2*time.Minute, 30*time.Second)
	if w == nil {
		return
	}
	reg, err := dist.NewRegistry(mwInc0)
	require.NoError(t, err)
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	var c comm.Comm = w
	if w.Rank() == 0 {
		c = &pingCutComm{Comm: w, to: 1, at: 4, cancel: rcancel, mu: &sync.Mutex{}, sent: new(int)}
	}
	start := time.Now()
	err = dist.RunMaster(rctx, c, 0, reg, []scheduler.Option{scheduler.WithWorkers(1)}, func(context.Context, *dist.Master) error {
		return fmt.Errorf("the master's function ran")
	})
	t.Logf("rank %d: %v after %v", w.Rank(), err, time.Since(start))
	if w.Rank() == 0 {
		require.ErrorIs(t, err, context.Canceled)
		return
	}
	assert.ErrorContains(t, err, fmt.Sprintf("dist: RunMaster: rank %d: the master failed to start: dist: RunMaster: master rank 0: measuring the link to rank 1", w.Rank()))
	assert.NoError(t, ctx.Err(), "the worker rank's own deadline passed")
}
