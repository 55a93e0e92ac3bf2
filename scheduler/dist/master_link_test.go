package dist_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// dmdaRun runs, on 3 in-process ranks of one worker each under dmda with
// the performance models in dir, the tasks submit submits on the master,
// and returns the tasks each rank ran.
func dmdaRun(t *testing.T, dir string, cl *scheduler.Codelet, submit func(ctx context.Context, m *dist.Master) error) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	const ranks = 3
	per := make([]int64, ranks)
	err := local.Run(ctx, ranks, func(ctx context.Context, c comm.Comm) error {
		return dmdaMaster(ctx, c, dir, cl, submit, per)
	})
	require.NoError(t, err)
	return per
}

// dmdaMaster is dmdaRun's RunMaster on one rank of c: on the master
// (rank 0), per gets the tasks each rank ran.
func dmdaMaster(ctx context.Context, c comm.Comm, dir string, cl *scheduler.Codelet, submit func(ctx context.Context, m *dist.Master) error, per []int64) error {
	reg, err := dist.NewRegistry(cl)
	if err != nil {
		return err
	}
	opts := []scheduler.Option{scheduler.WithWorkers(1), scheduler.WithPolicy("dmda"), scheduler.WithStats(true),
		scheduler.WithPerfModelDir(dir), scheduler.WithGetenv(func(string) string { return "" })}
	return dist.RunMaster(ctx, c, 0, reg, opts, func(ctx context.Context, m *dist.Master) error {
		if err := submit(ctx, m); err != nil {
			return err
		}
		if err := m.WaitAll(ctx); err != nil {
			return err
		}
		for _, w := range m.Local().Stats() {
			per[m.RankOf(w.Worker)] += w.Tasks
		}
		return nil
	})
}

// TestMasterDMDATransferHeavy is the user trial's shape: 320 short tasks
// (a touch of every 4096th element) on 32 vectors of 4 MiB, 10 rounds,
// which each cost far more to send to a worker rank and back than to run
// on the master. dmda sees the worker ranks through their links (the
// ping at RunMaster's start, refined by the tasks' round trips) and keeps
// the tasks on the master: before, every proxy was a CPU worker in the
// master's RAM, of no transfer cost and one history with the master's
// cores, and 20 to 50 of the 320 went to the worker ranks (each 5 to 35
// ms there and back).
//
// The codelet's model is written beforehand (writeTouchModel), so that the
// placement depends on the links alone: a run that calibrated it first
// measured the tasks' times on a loaded machine, where one preempted
// touch takes milliseconds, and 18 of 320 went to the worker ranks once
// under the whole package's load. With the model's 500 ns, the master's
// queue (at most 32 tasks are ready at once, one per vector) predicts
// at most 16.5 µs, where moving 4 MiB to a worker rank and back costs,
// by the link's ping, 160 µs or more in-process on this machine: no
// task goes to a worker rank, whatever the load. A link that dmda did
// not price sends the master's second task to a free worker rank.
func TestMasterDMDATransferHeavy(t *testing.T) {
	dir := t.TempDir()
	touch := mwTouch()
	writeTouchModel(t, dir, touch)
	per := dmdaRun(t, dir, touch, submitTouches(touch))
	checkTransferHeavy(t, per)
}

// touchModelNs is the mean time, in ns, of writeTouchModel's model.
const touchModelNs = 500

// writeTouchModel writes into dir the performance model of touch for
// the transfer-heavy shape's tasks: calibrated (n = 1000) at
// touchModelNs on CPU workers, of no deviation, so that the run's own
// measurements, all far from it on a loaded machine, are left out as
// outliers (scheduler.HistoryModel), and those near it move it little.
func writeTouchModel(t *testing.T, dir string, touch *scheduler.Codelet) {
	t.Helper()
	s, err := scheduler.New(t.Context(), scheduler.WithWorkers(1), scheduler.WithGetenv(func(string) string { return "" }))
	require.NoError(t, err)
	h, err := s.RegisterVector(make([]float64, touchElems))
	require.NoError(t, err)
	fp := scheduler.NewTask(touch, scheduler.RW(h)).Footprint()
	require.NoError(t, s.Close())
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost" // as the scheduler names its model files
	}
	b, err := json.Marshal(map[string]any{
		"model": touch.Model.Name, "host": host,
		"entries": []map[string]any{{"footprint": fp, "kind": "cpu", "n": 1000, "mean_ns": touchModelNs, "stddev_ns": 0}},
	})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, touch.Model.Name+"."+host+".json"), b, 0o644))
}

// The transfer-heavy shape: touchBlocks vectors of touchElems float64s
// (4 MiB), touchRounds rounds of a task on each.
const touchBlocks, touchRounds, touchElems = 32, 10, 4 << 17

// mwTouch returns a codelet that adds 1 to every 4096th element of its
// vector, with a history model.
func mwTouch() *scheduler.Codelet {
	return &scheduler.Codelet{Name: "mw.touch", Model: scheduler.HistoryModel("mw.touch"), CPU: func(c *scheduler.Call) error {
		x := scheduler.VectorOf[float64](c, 0)
		for i := 0; i < len(x); i += 4096 {
			x[i]++
		}
		return nil
	}}
}

// submitTouches submits the transfer-heavy shape's tasks of touch.
func submitTouches(touch *scheduler.Codelet) func(ctx context.Context, m *dist.Master) error {
	return func(ctx context.Context, m *dist.Master) error {
		hs := make([]*scheduler.Handle, touchBlocks)
		for i := range hs {
			var err error
			if hs[i], err = m.Local().RegisterVector(make([]float64, touchElems)); err != nil {
				return err
			}
		}
		for range touchRounds {
			for _, h := range hs {
				if err := m.Submit(ctx, touch, scheduler.RW(h)); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// checkTransferHeavy checks where the transfer-heavy shape's tasks ran.
func checkTransferHeavy(t *testing.T, per []int64) {
	t.Helper()
	var all int64
	for _, k := range per {
		all += k
	}
	require.Equal(t, int64(touchBlocks*touchRounds), all, "tasks per rank %v", per)
	assert.Zero(t, all-per[0], "tasks per rank %v: every task on the master's core", per)
}

// TestMasterDMDAComputeHeavy: tasks of 20 ms on 64 bytes, whose transfers
// cost next to nothing, spread over every rank's worker (a third each
// under an even split; at least a sixth each is asked), once a first run
// has calibrated their model: the links do not keep work away from the
// worker ranks where compute dominates.
func TestMasterDMDAComputeHeavy(t *testing.T) {
	dir := t.TempDir()
	work := &scheduler.Codelet{Name: "mw.work", Model: scheduler.HistoryModel("mw.work"), CPU: func(c *scheduler.Call) error {
		time.Sleep(20 * time.Millisecond) // the task's work: 20 ms, whatever the machine's load
		scheduler.VectorOf[float64](c, 0)[0]++
		return nil
	}}
	submit := func(n int) func(ctx context.Context, m *dist.Master) error {
		return func(ctx context.Context, m *dist.Master) error {
			for range n {
				h, err := m.Local().RegisterVector(make([]float64, 8))
				if err != nil {
					return err
				}
				if err := m.Submit(ctx, work, scheduler.RW(h)); err != nil {
					return err
				}
			}
			return nil
		}
	}
	dmdaRun(t, dir, work, submit(12))
	const n = 30
	per := dmdaRun(t, dir, work, submit(n))
	require.Equal(t, int64(n), per[0]+per[1]+per[2], "tasks per rank %v", per)
	for r, k := range per {
		assert.GreaterOrEqual(t, k, int64(n/6), "tasks per rank %v: rank %d ran too few", per, r)
	}
}
