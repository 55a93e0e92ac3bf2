package dist_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

var (
	// mwInc0 adds 1 through its buffer 0 only.
	mwInc0 = &scheduler.Codelet{Name: "mw.inc0", CPU: func(c *scheduler.Call) error {
		x := scheduler.VectorOf[float64](c, 0)
		for i := range x {
			x[i]++
		}
		return nil
	}}
	// mwPrefix does x[i] += y[i-1]: a prefix sum when x and y are one
	// buffer.
	mwPrefix = &scheduler.Codelet{Name: "mw.prefix", CPU: func(c *scheduler.Call) error {
		x, y := scheduler.VectorOf[float64](c, 0), scheduler.VectorOf[float64](c, 1)
		for i := 1; i < len(x); i++ {
			x[i] += y[i-1]
		}
		return nil
	}}
)

// withinWorkers returns ctx submitting to a scheduling context of the
// master's workers ids.
func withinWorkers(ctx context.Context, m *dist.Master, name string, ids ...int) (context.Context, error) {
	cx, err := m.Local().NewContext(name, scheduler.ContextWorkers(ids...))
	if err != nil {
		return nil, err
	}
	return scheduler.Within(ctx, cx), nil
}

// A task naming one handle twice sees one buffer through both indexes,
// on the master's own worker and on another rank alike (scheduler.md:
// "each Call index sees the same buffer").
func TestMasterAliasedHandle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	got := map[string][2][]float64{}
	err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		reg, err := dist.NewRegistry(mwInc0, mwPrefix)
		if err != nil {
			return err
		}
		return dist.RunMaster(ctx, c, 0, reg, []scheduler.Option{scheduler.WithWorkers(1)}, func(ctx context.Context, m *dist.Master) error {
			for _, where := range []struct {
				name   string
				worker int
			}{{"master", 0}, {"remote", 1}} {
				wctx, err := withinWorkers(ctx, m, where.name, where.worker)
				if err != nil {
					return err
				}
				a, b := []float64{1, 1, 1, 1}, []float64{1, 1, 1, 1}
				ha, err := m.Local().RegisterVector(a)
				if err != nil {
					return err
				}
				hb, err := m.Local().RegisterVector(b)
				if err != nil {
					return err
				}
				if err := m.Submit(wctx, mwInc0, scheduler.RW(ha), scheduler.RW(ha)); err != nil {
					return err
				}
				if err := m.Submit(wctx, mwPrefix, scheduler.RW(hb), scheduler.R(hb)); err != nil {
					return err
				}
				if err := m.WaitAll(ctx); err != nil {
					return err
				}
				for _, h := range []*scheduler.Handle{ha, hb} {
					if _, err := h.Unregister(ctx); err != nil {
						return err
					}
				}
				got[where.name] = [2][]float64{a, b}
			}
			return nil
		})
	})
	require.NoError(t, err)
	for _, where := range []string{"master", "remote"} {
		assert.Equal(t, []float64{2, 2, 2, 2}, got[where][0], "RW(h), RW(h) on the %s worker", where)
		assert.Equal(t, []float64{1, 2, 3, 4}, got[where][1], "RW(h), R(h) on the %s worker", where)
	}
}

// When RunMaster's context ends, tasks not started do not start, the
// master does not wait for a task running on another rank, and RunMaster
// returns the context's error.
func TestMasterContextEnds(t *testing.T) {
	const ntasks = 40
	// Shorter than testTimeout: a master that waits for the remote task
	// deadlocks until then.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var ran atomic.Int32
	started := make(chan int, ntasks)
	masterDone := make(chan struct{}) // the master's RunMaster returned
	mctx, mcancel := context.WithCancel(ctx)
	defer mcancel()
	var masterErr error
	err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		rank := c.Rank()
		// On the master, the task waits for the master's context to end;
		// on the worker rank, for the master to have returned, so that
		// the master cannot wait for it.
		slow := &scheduler.Codelet{Name: "slow", CPU: func(*scheduler.Call) error {
			started <- rank
			if rank == 0 {
				<-mctx.Done()
			} else {
				select {
				case <-masterDone:
				case <-ctx.Done():
				}
			}
			ran.Add(1)
			return nil
		}}
		reg, err := dist.NewRegistry(slow)
		if err != nil {
			return err
		}
		rctx := ctx
		if rank == 0 {
			rctx = mctx
		}
		err = dist.RunMaster(rctx, c, 0, reg, []scheduler.Option{scheduler.WithWorkers(1)}, func(ctx context.Context, m *dist.Master) error {
			for range ntasks {
				if err := m.Submit(ctx, slow); err != nil {
					return err
				}
			}
			for range 2 { // one task on each rank
				select {
				case <-started:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			mcancel()
			return m.WaitAll(ctx)
		})
		if rank == 0 {
			masterErr = err
			close(masterDone)
		}
		return err
	})
	require.ErrorIs(t, masterErr, context.Canceled)
	require.NoError(t, ctx.Err(), "the ranks returned only at the test's deadline")
	var re *comm.RankError
	if errors.As(err, &re) {
		assert.Equal(t, 0, re.Rank, "only the master fails: %v", err)
	}
	assert.LessOrEqual(t, ran.Load(), int32(2), "tasks started after the context ended")
}

// A task that fails on a worker rank is the master's failure, named
// there; the worker rank's RunMaster returns nil.
func TestMasterTaskFailsOnWorkerRank(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	boom := errors.New("boom")
	fails := &scheduler.Codelet{Name: "fails", CPU: func(*scheduler.Call) error { return boom }}
	panics := &scheduler.Codelet{Name: "panics", CPU: func(*scheduler.Call) error { panic("kaboom") }}
	var taskErr error
	err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		reg, err := dist.NewRegistry(fails, panics)
		if err != nil {
			return err
		}
		return dist.RunMaster(ctx, c, 0, reg, []scheduler.Option{scheduler.WithWorkers(1)}, func(ctx context.Context, m *dist.Master) error {
			rctx, err := withinWorkers(ctx, m, "remote", 1)
			if err != nil {
				return err
			}
			for _, cl := range []*scheduler.Codelet{fails, panics} {
				if err := m.Submit(rctx, cl); err != nil {
					return err
				}
			}
			taskErr = m.WaitAll(ctx)
			return nil // the master handles the failure
		})
	})
	require.NoError(t, err, "a worker rank returned the master's task failure")
	require.Error(t, taskErr)
	assert.Contains(t, taskErr.Error(), "on rank 1")
	assert.Contains(t, taskErr.Error(), "boom")
	assert.Contains(t, taskErr.Error(), "kaboom")
}

// Ranks that pass different roots all return an error naming them.
func TestMasterRootMismatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	errs := make([]error, 3)
	_ = local.Run(ctx, 3, func(ctx context.Context, c comm.Comm) error {
		reg, err := dist.NewRegistry(mwInc0)
		if err != nil {
			return err
		}
		root := 0
		if c.Rank() == 1 {
			root = 1
		}
		errs[c.Rank()] = dist.RunMaster(ctx, c, root, reg, []scheduler.Option{scheduler.WithWorkers(1)}, func(ctx context.Context, m *dist.Master) error {
			return m.WaitAll(ctx)
		})
		return errs[c.Rank()]
	})
	require.NoError(t, ctx.Err(), "the ranks returned only at the test's deadline")
	for r, err := range errs {
		require.ErrorIs(t, err, comm.ErrInvalidArg, "rank %d", r)
		assert.Contains(t, err.Error(), "(rank 0 root 0, rank 1 root 1, rank 2 root 0)", "rank %d: each rank's root, once", r)
		assert.Equal(t, 1, strings.Count(err.Error(), "root 1"), "rank %d: the roots listed once: %v", r, err)
	}
}

// A panic in the master's function closes the master's scheduler, stops
// the workers and comes back as an error.
func TestMasterPanicClosesScheduler(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var ls *scheduler.Scheduler
	errs := make([]error, 2)
	_ = local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		reg, err := dist.NewRegistry(mwInc0)
		if err != nil {
			return err
		}
		errs[c.Rank()] = dist.RunMaster(ctx, c, 0, reg, []scheduler.Option{scheduler.WithWorkers(2)}, func(ctx context.Context, m *dist.Master) error {
			ls = m.Local()
			h, err := ls.RegisterVector(make([]float64, 4))
			if err != nil {
				return err
			}
			if err := m.Submit(ctx, mwInc0, scheduler.RW(h)); err != nil {
				return err
			}
			panic("fn fails")
		})
		return errs[c.Rank()]
	})
	require.NoError(t, ctx.Err(), "the ranks returned only at the test's deadline")
	require.Error(t, errs[0])
	assert.Contains(t, errs[0].Error(), "fn fails")
	// The master's failure breaks the world once its RunMaster returns,
	// after the worker rank took its stop: not the worker's failure.
	assert.NoError(t, errs[1], "the worker rank")
	require.NotNil(t, ls)
	_, err := ls.RegisterVector(make([]float64, 1))
	assert.ErrorIs(t, err, scheduler.ErrClosed, "the master's scheduler is still open")
}

// When the master's function returns an error, RunMaster gives up the
// tasks it submitted as it does when its context ends: it does not wait
// for a task still running on a worker rank (here one that waits for the
// master's RunMaster to return), and the tasks after it do not run. The
// worker rank, stopped, returns nil.
func TestMasterFnErrorGivesUpTheGraph(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	gate := make(chan struct{})
	var after atomic.Int64
	block := &scheduler.Codelet{Name: "mw.block", CPU: func(*scheduler.Call) error { <-gate; return nil }}
	count := &scheduler.Codelet{Name: "mw.count", CPU: func(*scheduler.Call) error { after.Add(1); return nil }}
	bad := errors.New("bad input")
	errs := make([]error, 2)
	_ = local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		reg, err := dist.NewRegistry(block, count)
		if err != nil {
			return err
		}
		errs[c.Rank()] = dist.RunMaster(ctx, c, 0, reg, []scheduler.Option{scheduler.WithWorkers(1)}, func(ctx context.Context, m *dist.Master) error {
			h, err := m.Local().RegisterVector(make([]float64, 4))
			if err != nil {
				return err
			}
			remote, err := withinWorkers(ctx, m, "remote", 1) // worker 1: rank 1's core
			if err != nil {
				return err
			}
			if err := m.Submit(remote, block, scheduler.RW(h)); err != nil {
				return err
			}
			for range 20 {
				if err := m.Submit(ctx, count, scheduler.RW(h)); err != nil {
					return err
				}
			}
			return bad
		})
		if c.Rank() == 0 {
			close(gate) // rank 1's task ends once the master has returned
		}
		return errs[c.Rank()]
	})
	require.NoError(t, ctx.Err(), "RunMaster waited for the task it had given up")
	require.ErrorIs(t, errs[0], bad)
	assert.NoError(t, errs[1], "the worker rank")
	assert.Zero(t, after.Load(), "tasks after the give-up ran")
}
