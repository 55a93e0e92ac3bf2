package runtimeview_test

import (
	"context"
	"errors"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/hardware"
	pzprocs "github.com/pzgo/pz/internal/procs"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// Each in-process rank gets a scheduler with its share of the cores, the
// same one on every call, and the process one P more while they are open;
// a graph spans the ranks; Close closes it.
func TestSchedulerSpansRanks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 3
	var closed [n]*dist.Scheduler
	procs := runtime.GOMAXPROCS(0)
	user := pzprocs.UserSet(os.Getenv("GOMAXPROCS"))
	err := runtimeview.RunLocal(ctx, n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		// The workers share GOMAXPROCS, lowered to a CPU quota unless the
		// user set GOMAXPROCS (TestSchedulerWorkersUnderQuota).
		pool := procs
		if u := rt.MyResourceSet().CPU().Usable(); !user && u > 0 {
			pool = min(procs, max(int(math.Ceil(u-1e-9)), 1))
		}
		spare := !user && pool >= procs
		d, err := rt.Scheduler(ctx)
		require.NoError(t, err)
		again, err := rt.Scheduler(ctx)
		require.NoError(t, err)
		require.Same(t, d, again)
		require.NoError(t, rt.Barrier(ctx))
		if got := runtime.GOMAXPROCS(0); spare && got != procs+1 {
			t.Errorf("rank %d: GOMAXPROCS %d with the schedulers open, want %d: one P beyond the workers for the transfers' progress", rt.Rank(), got, procs+1)
		}
		want := pool / n
		if rt.Rank() < pool%n {
			want++ // the remainder goes to the first ranks
		}
		if want = max(want, 1); len(d.Local().Workers()) != want {
			t.Errorf("rank %d: %d workers, want %d", rt.Rank(), len(d.Local().Workers()), want)
		}
		// Every rank's counter is incremented on rank 0.
		hs := make([]*dist.Handle, n)
		for r := range n {
			var data []int64
			if r == rt.Rank() {
				data = []int64{int64(r)}
			}
			if hs[r], err = dist.Register(d, r, data, 1, 1); err != nil {
				return err
			}
		}
		inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
			scheduler.VectorOf[int64](c, 0)[0] += 100
			return nil
		}}
		for r := range n {
			if err := d.Submit(ctx, inc, dist.RW(hs[r]), dist.OnRank(0)); err != nil {
				return err
			}
		}
		if err := d.WaitAll(ctx); err != nil {
			return err
		}
		if got := hs[rt.Rank()].Data().([]int64)[0]; got != int64(100+rt.Rank()) {
			t.Errorf("rank %d: counter %d, want %d", rt.Rank(), got, 100+rt.Rank())
		}
		closed[rt.Rank()] = d
		return nil
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()))
	require.NoError(t, err)
	require.Equal(t, procs, runtime.GOMAXPROCS(0), "Close gives the spare P back")
	for r, d := range closed {
		require.ErrorIs(t, d.WaitAll(ctx), dist.ErrClosed, "rank %d: the view's Close closes its scheduler", r)
	}
}

// A rank whose Scheduler fails (here: another rank has already left, so
// the collective set-up cannot complete) gets the error and keeps no
// goroutine of the node-local scheduler made before the failure.
func TestSchedulerFailureLeavesNoGoroutine(t *testing.T) {
	checkNoLeak(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var schedErr error
	err := runtimeview.RunLocal(ctx, 2, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		if rt.Rank() == 1 {
			return errors.New("rank 1 gives up")
		}
		// The barrier fails once rank 1 has returned. RunLocal has
		// canceled ctx then: a context that is not stops New earlier.
		require.Error(t, rt.Barrier(ctx))
		_, schedErr = rt.Scheduler(context.Background())
		return nil
	})
	require.ErrorContains(t, err, "rank 1 gives up")
	require.ErrorIs(t, schedErr, comm.ErrBroken)
}

// A rank whose function fails (an error, or a panic) in the middle of a
// graph gives the graph up before its Close: the others' WaitAll return
// (or their Submit, once they heard) at once dist.ErrRankFailed naming it and its error - also comm.ErrBroken
// - rather than a difference of the ranks' graphs (its Close used to wait
// for the graph with the others, one submission short), and RunLocal's
// error leads with the failed rank's.
func TestFailedRankGivesUpGraph(t *testing.T) {
	for _, how := range []string{"error", "panic"} {
		t.Run(how, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			const n = 3
			noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
			boom := errors.New("input file missing")
			waitErrs := make([]error, n)
			err := runtimeview.RunLocal(ctx, n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				// The first of the rank's calls to fail: Scheduler (a
				// rank slow to start while rank 2 already failed), Submit
				// (once the rank heard), or WaitAll.
				err := func() error {
					d, err := rt.Scheduler(ctx)
					if err != nil {
						return err
					}
					hs, err := dist.RegisterTiles[float64](d, 1, n, 4, 1, dist.Cyclic1D(n, n), nil)
					if err != nil {
						return err
					}
					err = d.Submit(ctx, noop, dist.RW(hs[0][n-1]))
					if rt.Rank() == n-1 {
						if how == "panic" {
							panic(boom)
						}
						return boom
					}
					if err == nil {
						err = d.Submit(ctx, noop, dist.R(hs[0][n-1]), dist.RW(hs[0][0]))
					}
					if err == nil {
						err = d.WaitAll(ctx)
					}
					return err
				}()
				waitErrs[rt.Rank()] = err
				return err
			})
			require.Error(t, err)
			// Heard from rank 2 itself, or from its failure breaking
			// the communicator (a rank slow to submit).
			wants := []string{"rank 2 gave up the graph: input file missing", "rank 2 failed: input file missing"}
			if how == "panic" {
				wants = []string{"rank 2 gave up the graph: its function panicked: input file missing", "rank 2 failed: panic: input file missing"}
			}
			for r := range n - 1 {
				// dist.ErrRankFailed, unless the rank's context ended
				// first: RunLocal cancels it when another rank that
				// heard returns its error. Either way comm.ErrBroken.
				require.ErrorIs(t, waitErrs[r], comm.ErrBroken, "rank %d; run: %v", r, err)
				require.NotErrorIs(t, waitErrs[r], dist.ErrGraphMismatch, "rank %d", r)
				msg := waitErrs[r].Error()
				if !strings.Contains(msg, wants[0]) && !strings.Contains(msg, wants[1]) {
					t.Errorf("rank %d: %q names neither %q nor %q", r, msg, wants[0], wants[1])
				}
			}
			var res comm.RankErrors
			require.ErrorAs(t, err, &res)
			require.Equal(t, n-1, res[0].Rank, "the failed rank leads:\n%v", err)
		})
	}
}

// RunMaster on in-process ranks offers each rank's share of GOMAXPROCS,
// as Scheduler's workers are (dist.RunMaster's own default, every core
// per rank, gave 8 workers on 4 ranks of 2 cores), and the master's
// tasks run on the other ranks' workers with their results back.
func TestRunMasterOffersShares(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if os.Getenv("PZ_NCPU") != "" {
		t.Skip("PZ_NCPU sets the worker count")
	}
	const n = 4
	procs := runtime.GOMAXPROCS(0)
	want := 0
	for r := range n {
		want += max(procs/n+btoi(r < procs%n), 1)
	}
	double := &scheduler.Codelet{Name: "double", CPU: func(c *scheduler.Call) error {
		for i, x := range scheduler.VectorOf[float64](c, 0) {
			scheduler.VectorOf[float64](c, 0)[i] = 2 * x
		}
		return nil
	}}
	err := runtimeview.RunLocal(ctx, n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		reg, err := dist.NewRegistry(double)
		if err != nil {
			return err
		}
		return rt.RunMaster(ctx, 0, reg, func(ctx context.Context, m *dist.Master) error {
			if m.Workers() != want {
				t.Errorf("the master has %d workers, want %d (each rank's share of %d Ps)", m.Workers(), want, procs)
			}
			vs := make([][]float64, 16)
			for i := range vs {
				vs[i] = []float64{float64(i)}
				h, err := m.Local().RegisterVector(vs[i])
				if err != nil {
					return err
				}
				if err := m.Submit(ctx, double, scheduler.RW(h)); err != nil {
					return err
				}
			}
			if err := m.WaitAll(ctx); err != nil {
				return err
			}
			for i, v := range vs {
				if v[0] != 2*float64(i) {
					t.Errorf("vector %d is %v after double, want %v", i, v[0], 2*float64(i))
				}
			}
			return nil
		})
	}, runtimeview.WithMachine(cpuMachine(procs, 0))) // no CPU quota lowers the shares
	require.NoError(t, err)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Two libraries on one RuntimeView, each asking Scheduler for options of
// its own (helper-145's trial): the second library's options cannot
// apply to the scheduler the first one made. Scheduler used to return
// the first one's scheduler and drop them without a word (the second
// asked for 1 worker and the eager policy and got 3 workers and dmda);
// it refuses them with an error that names the first option in conflict
// and the call that made the scheduler, and a later call without
// options shares it.
func TestSchedulerLaterOptionsRefused(t *testing.T) {
	err := runtimeview.RunLocal(testCtx(t), 2, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		d, err := rt.Scheduler(ctx, scheduler.WithPolicy("dmda"), scheduler.WithWorkers(3)) // library A
		require.NoError(t, err)
		again, err := rt.Scheduler(ctx, scheduler.WithPolicy("eager"), scheduler.WithWorkers(1)) // library B
		require.ErrorIs(t, err, runtimeview.ErrOption)
		require.ErrorIs(t, err, scheduler.ErrBadOption)
		require.Nil(t, again)
		require.Contains(t, err.Error(), `scheduler.WithPolicy("eager") (option 1 of the later options)`)
		require.Contains(t, err.Error(), `which give scheduler.WithPolicy("dmda")`)
		require.Contains(t, err.Error(), "scheduler_test.go:", "names the call that made the scheduler")
		require.Contains(t, err.Error(), "or none")
		require.Equal(t, "dmda", d.Local().Policy(), "the refused call changed nothing")
		require.Len(t, d.Local().Workers(), 3)
		shared, err := rt.Scheduler(ctx)
		require.NoError(t, err)
		require.Same(t, d, shared)
		return nil
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()))
	require.NoError(t, err)
}

// TestSchedulerSameOptionsShared: helpers that each call Scheduler with
// the options the program uses (the same ones, some of them, in another
// order) get the scheduler the first call made, on every rank; only an
// option that disagrees with the first call's is refused, named. Scheduler
// used to refuse any later call with options, even the same ones.
func TestSchedulerSameOptionsShared(t *testing.T) {
	getenv := func(k string) string { return os.Getenv(k) }
	err := runtimeview.RunLocal(testCtx(t), 2, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		d, err := rt.Scheduler(ctx, scheduler.WithPolicy("dmda"), scheduler.WithWorkers(2), scheduler.WithStats(true))
		require.NoError(t, err)
		for i, opts := range [][]scheduler.Option{
			{scheduler.WithPolicy("dmda"), scheduler.WithWorkers(2), scheduler.WithStats(true)}, // the same
			{scheduler.WithWorkers(2), scheduler.WithPolicy("dmda")},                            // some, reordered
			{scheduler.WithStats(true)},
			{scheduler.WithWorkers(5), scheduler.WithWorkers(2)}, // the last one counts, as in New
			nil, // none
		} {
			again, err := rt.Scheduler(ctx, opts...)
			require.NoError(t, err, "call %d", i)
			require.Same(t, d, again, "call %d", i)
		}
		for _, tc := range []struct {
			opts []scheduler.Option
			want string
		}{
			{[]scheduler.Option{scheduler.WithPolicy("dmda"), scheduler.WithWorkers(1)}, "scheduler.WithWorkers(1) (option 2 of the later options) disagrees with the first options, which give scheduler.WithWorkers(2)"},
			{[]scheduler.Option{scheduler.WithStats(false)}, "scheduler.WithStats(false) (option 1 of the later options) disagrees with the first options, which give scheduler.WithStats(true)"},
			{[]scheduler.Option{scheduler.WithSpin(8)}, "scheduler.WithSpin(8) (option 1 of the later options) disagrees with the first options, which do not give scheduler.WithSpin"},
			{[]scheduler.Option{scheduler.WithGetenv(getenv)}, "scheduler.WithGetenv(a function) (option 1 of the later options)"},
		} {
			again, err := rt.Scheduler(ctx, tc.opts...)
			require.ErrorIs(t, err, runtimeview.ErrOption)
			require.ErrorIs(t, err, scheduler.ErrBadOption)
			require.Nil(t, again)
			require.Contains(t, err.Error(), tc.want)
		}
		require.Equal(t, "dmda", d.Local().Policy(), "the refused calls changed nothing")
		require.Len(t, d.Local().Workers(), 2)
		return nil
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()))
	require.NoError(t, err)
}
