//go:build mpi

package dist_test

import (
	"context"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/internal/procs"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// TestMPIMasterSharesWork: under mpirun -n 2, mpi.Init sizes each rank's
// GOMAXPROCS to its share of the cores, which RunMaster's workers take
// whole. The master's proxy and rank 1's slot, which exchange the
// tasks, ran only when a computing worker was preempted, and rank 1 ran
// 20-30% of a compute-heavy graph (examples/sweep: 47-76 of 257 tasks).
// Now RunMaster gives them a P of their own on both ranks (GOMAXPROCS
// one more while it runs, put back after), and rank 1 runs about half
// of 100 tasks of 5 ms: the test counts them (at least 30), each rank
// its own. Run with PZ_MASTER_SPARE_P=0, it fails as before.
func TestMPIMasterSharesWork(t *testing.T) {
	ctx, w := onTwoMPIRanks(t, "TestMPIMasterSharesWork")
	if w == nil {
		return
	}
	const ntasks, work = 100, 5 * time.Millisecond
	before := runtime.GOMAXPROCS(0)
	var ran atomic.Int64
	var slotProcs atomic.Int64 // GOMAXPROCS as a task saw it on rank 1
	busy := &scheduler.Codelet{Name: "mw.busy", CPU: func(c *scheduler.Call) error {
		t0 := time.Now()
		x := scheduler.VectorOf[float64](c, 0)
		for time.Since(t0) < work { // computes: holds its P
			x[0]++
		}
		ran.Add(1)
		slotProcs.Store(int64(runtime.GOMAXPROCS(0)))
		return nil
	}}
	reg, err := dist.NewRegistry(busy)
	require.NoError(t, err)
	var inFn int
	err = dist.RunMaster(ctx, w, 0, reg, nil, func(ctx context.Context, m *dist.Master) error {
		inFn = runtime.GOMAXPROCS(0)
		data := make([][]float64, ntasks)
		for i := range data {
			data[i] = make([]float64, 8)
			h, err := m.Local().RegisterVector(data[i])
			if err != nil {
				return err
			}
			if err := m.Submit(ctx, busy, scheduler.RW(h)); err != nil {
				return err
			}
		}
		return m.WaitAll(ctx)
	})
	require.NoError(t, err)
	assert.Equal(t, before, runtime.GOMAXPROCS(0), "GOMAXPROCS after RunMaster")
	counts, err := comm.AllGatherValues(ctx, w, ran.Load())
	require.NoError(t, err)
	t.Logf("rank %d: GOMAXPROCS %d, in RunMaster %d; tasks per rank %v", w.Rank(), before, max(inFn, int(slotProcs.Load())), counts)
	if !procs.UserSet(os.Getenv("GOMAXPROCS")) && os.Getenv(dist.EnvMasterSpareP) != "0" {
		if w.Rank() == 0 {
			assert.Equal(t, before+1, inFn, "the master's GOMAXPROCS while its fn ran")
		} else if counts[1] > 0 {
			assert.Equal(t, int64(before+1), slotProcs.Load(), "rank 1's GOMAXPROCS while it ran a task")
		}
	}
	assert.Equal(t, int64(ntasks), counts[0]+counts[1])
	assert.GreaterOrEqual(t, counts[1], int64(ntasks*30/100), "rank 1's share of %d tasks of %v (tasks per rank %v)", ntasks, work, counts)
}
