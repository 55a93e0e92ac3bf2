package dist_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// A master whose WaitAll gives up (its deadline passed, its context was
// canceled) while a task is stuck on a worker rank names that rank and
// that task, not only how many tasks were pending: the program's
// deadline is how a user finds a stuck worker.
func TestMasterWaitAllNamesRemoteTask(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	started := make(chan struct{})
	release := make(chan struct{}) // the stuck task returns once the master has given up
	var waitErr error
	err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		rank := c.Rank()
		stuck := &scheduler.Codelet{Name: "mw.stuck", CPU: func(*scheduler.Call) error {
			if rank == 1 {
				close(started)
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return nil
		}}
		reg, err := dist.NewRegistry(stuck)
		if err != nil {
			return err
		}
		return dist.RunMaster(ctx, c, 0, reg, []scheduler.Option{scheduler.WithWorkers(1)}, func(ctx context.Context, m *dist.Master) error {
			rctx, err := withinWorkers(ctx, m, "rank 1", 1)
			if err != nil {
				return err
			}
			h, err := m.Local().RegisterVector([]float64{1, 2}, scheduler.Named("x"))
			if err != nil {
				return err
			}
			if err := m.Submit(rctx, stuck, scheduler.RW(h)); err != nil {
				return err
			}
			wctx, wcancel := context.WithCancel(ctx)
			defer wcancel()
			select {
			case <-started:
			case <-ctx.Done():
				return ctx.Err()
			}
			wcancel() // as a deadline passing while the task runs on rank 1
			waitErr = m.WaitAll(wctx)
			close(release)
			return nil
		})
	})
	require.NoError(t, err)
	require.ErrorIs(t, waitErr, context.Canceled)
	assert.Contains(t, waitErr.Error(), `rank 1`)
	assert.Contains(t, waitErr.Error(), `"mw.stuck"`)
	assert.Contains(t, waitErr.Error(), `RW(handle "x")`)
}
