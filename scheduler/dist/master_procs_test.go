package dist_test

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// withGOMAXPROCS sets GOMAXPROCS to n for the test, and clears the
// environment variables that would change RunMaster's choice
// (GOMAXPROCS, dist.EnvMasterSpareP): the test sets those it needs.
func withGOMAXPROCS(t *testing.T, n int) {
	t.Helper()
	t.Setenv("GOMAXPROCS", "")
	t.Setenv(dist.EnvMasterSpareP, "")
	prev := runtime.GOMAXPROCS(n)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// masterProcs runs RunMaster on ranks in-process ranks, each offering
// workers cores (scheduler.WithWorkers), and returns GOMAXPROCS as the
// master's fn saw it, after fn called during (if not nil), and each
// rank's error.
func masterProcs(t *testing.T, ranks, workers int, during func()) (inFn int, errs []error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cs, err := local.New(ranks)
	require.NoError(t, err)
	reg, err := dist.NewRegistry(mwInc0)
	require.NoError(t, err)
	errs = make([]error, ranks)
	var wg sync.WaitGroup
	for r := range ranks {
		wg.Go(func() {
			errs[r] = dist.RunMaster(ctx, cs[r], 0, reg, []scheduler.Option{scheduler.WithWorkers(workers)}, func(ctx context.Context, m *dist.Master) error {
				inFn = runtime.GOMAXPROCS(0)
				if during != nil {
					during()
				}
				return nil
			})
		})
	}
	wg.Wait()
	return inFn, errs
}

// TestRunMasterSpareP: under mpirun each rank's GOMAXPROCS is its share
// of the cores, which its workers take whole (1 with 2 ranks on 2
// cores): the master's proxies and a worker rank's slots, which exchange
// the tasks, ran only when a computing worker was preempted (every ~10
// ms), and mpirun -n 2 of examples/sweep ran at 0.7-1.1x the sequential
// loop. RunMaster now raises GOMAXPROCS by one while it runs, on a rank
// whose workers take every P and that has other ranks to exchange tasks
// with, and puts it back when it returns; not when the user set
// GOMAXPROCS, nor with PZ_MASTER_SPARE_P=0. On in-process ranks, which
// share the process's GOMAXPROCS (the ranks' raises and restores
// overlap: the test checks what fn sees and what is left after).
func TestRunMasterSpareP(t *testing.T) {
	for _, tc := range []struct {
		name        string
		procs       int               // GOMAXPROCS before RunMaster
		env         map[string]string // set for the case
		ranks       int
		meanwhile   func() // run by the master's fn
		inFn, after int    // GOMAXPROCS while fn ran, and after RunMaster
	}{
		{name: "raised", procs: 1, ranks: 2, inFn: 2, after: 1},
		{name: "user GOMAXPROCS", procs: 1, env: map[string]string{"GOMAXPROCS": "1"}, ranks: 2, inFn: 1, after: 1},
		{name: "off", procs: 1, env: map[string]string{dist.EnvMasterSpareP: "0"}, ranks: 2, inFn: 1, after: 1},
		{name: "on", procs: 1, env: map[string]string{dist.EnvMasterSpareP: "1"}, ranks: 2, inFn: 2, after: 1},
		// 2 Ps, one worker on each rank: the ranks' workers leave a P.
		{name: "a P free already", procs: 2, ranks: 2, inFn: 2, after: 2},
		// No other rank: no proxies to give a P.
		{name: "one rank", procs: 1, ranks: 1, inFn: 1, after: 1},
		// The program set GOMAXPROCS while RunMaster ran: its choice is
		// kept, not overwritten by the restore.
		{name: "changed meanwhile", procs: 1, ranks: 2, meanwhile: func() { runtime.GOMAXPROCS(3) }, inFn: 2, after: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withGOMAXPROCS(t, tc.procs)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			inFn, errs := masterProcs(t, tc.ranks, 1, tc.meanwhile)
			for r := range tc.ranks {
				require.NoError(t, errs[r], "rank %d", r)
			}
			assert.Equal(t, tc.inFn, inFn, "GOMAXPROCS while the master's fn ran")
			assert.Equal(t, tc.after, runtime.GOMAXPROCS(0), "GOMAXPROCS after RunMaster")
		})
	}
	t.Run("bad value", func(t *testing.T) {
		withGOMAXPROCS(t, 1)
		t.Setenv(dist.EnvMasterSpareP, "yes")
		_, errs := masterProcs(t, 2, 1, nil)
		require.Error(t, errs[0])
		assert.ErrorIs(t, errs[0], comm.ErrInvalidArg)
		assert.ErrorContains(t, errs[0], `dist: RunMaster: master rank 0: comm: invalid argument: PZ_MASTER_SPARE_P="yes": want 1`)
		require.Error(t, errs[1], "the worker rank is told of the master's failure")
		assert.ErrorContains(t, errs[1], `dist: RunMaster: rank 1: the master failed to start: dist: RunMaster: master rank 0: comm: invalid argument: PZ_MASTER_SPARE_P="yes"`)
		assert.Equal(t, 1, runtime.GOMAXPROCS(0))
	})
}
