package dist_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
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

// The shape of the model-time tests: modelTimeTasks tasks, each reading
// and writing one vector of modelTimeElems float64s (32 MiB), which
// travels to rank 1 and back with each, and computing modelTimeSleep.
// modelTimeTasks is the scheduler's minSamples: the model takes in
// every measurement (it leaves out outliers only once calibrated), so
// its mean is the mean of what the master recorded.
const (
	modelTimeTasks = 10
	modelTimeElems = 4 << 20
	modelTimeSleep = time.Millisecond
	// modelTimeFloor is less than any machine takes to copy the vector
	// to rank 1 and back (2 x 32 MiB at 100 GB/s): a round trip is at
	// least the compute time and this.
	modelTimeFloor = 2 * modelTimeElems * 8 * time.Second / 100e9
)

// modelTimeResult is what runModelTime's master saw.
type modelTimeResult struct {
	model      time.Duration // the codelet's model entry
	calibrated bool
	tasks      int64         // tasks run by rank 1's workers
	roundTrip  time.Duration // their mean time on the master's proxies
}

// runModelTime runs, on rank c's part of a RunMaster, modelTimeTasks
// tasks of a codelet with a history model on rank 1 (each rank's model
// under its own directory in dir), and on the master fills res. The
// codelet adds each of its run times on rank 1 to computed.
func runModelTime(ctx context.Context, c comm.Comm, dir string, res *modelTimeResult, computed *atomic.Int64) error {
	cl := &scheduler.Codelet{Name: "modeltime", Model: scheduler.HistoryModel("dist_test.modeltime"), CPU: func(c *scheduler.Call) error {
		t0 := time.Now()
		time.Sleep(modelTimeSleep)
		computed.Add(int64(time.Since(t0)))
		return nil
	}}
	reg, err := dist.NewRegistry(cl)
	if err != nil {
		return err
	}
	opts := []scheduler.Option{scheduler.WithWorkers(1), scheduler.WithStats(true),
		scheduler.WithPerfModelDir(filepath.Join(dir, strconv.Itoa(c.Rank()))), scheduler.WithGetenv(func(string) string { return "" })}
	return dist.RunMaster(ctx, c, 0, reg, opts, func(ctx context.Context, m *dist.Master) error {
		on1, err := onRank1(m)
		if err != nil {
			return err
		}
		h, err := m.Local().RegisterVector(make([]float64, modelTimeElems))
		if err != nil {
			return err
		}
		for range modelTimeTasks {
			if err := m.Submit(ctx, cl, scheduler.RW(h), scheduler.InContext(on1)); err != nil {
				return err
			}
		}
		if err := m.WaitAll(ctx); err != nil {
			return err
		}
		var busy time.Duration
		for _, w := range m.Local().Stats() {
			if m.RankOf(w.Worker) == 1 {
				if !w.Timed {
					return errors.New("the proxies' stats were not timed")
				}
				busy += w.Busy
				res.tasks += w.Tasks
			}
		}
		if res.tasks > 0 {
			res.roundTrip = busy / time.Duration(res.tasks)
		}
		ns, ok := m.Local().ModelEstimate(cl, scheduler.CPUWorker, scheduler.RW(h))
		res.model, res.calibrated = time.Duration(ns), ok
		return nil
	})
}

// checkModelTime checks, on the master, that the model holds the time
// the tasks computed on rank 1, not their round trips: at least their
// sleep, and less than the round trip by at least the time the vector
// takes to travel there and back. A master that recorded the round
// trip has a model of exactly the proxies' mean busy time.
func checkModelTime(t *testing.T, res modelTimeResult) {
	t.Helper()
	require.Equal(t, int64(modelTimeTasks), res.tasks, "tasks run by rank 1")
	require.True(t, res.calibrated, "the codelet's model is calibrated after %d tasks", modelTimeTasks)
	msg := fmt.Sprintf("model %v, mean round trip %v (32 MiB there and back: at least %v more than the compute)", res.model, res.roundTrip, modelTimeFloor)
	assert.GreaterOrEqual(t, res.model, modelTimeSleep, "the model holds less than the tasks' compute time: %s", msg)
	assert.LessOrEqual(t, res.model, res.roundTrip-modelTimeFloor, "the model holds the round trip with the transfers, not the compute time: %s", msg)
}

// TestMasterModelTime: a task run on a worker rank records in its
// codelet's performance model the time it computed there (the worker
// rank reports it; the master's proxy passes it to Call.SetModelTime),
// not the proxy's round trip, whose transfers the rank's link prices:
// 10 tasks of a 1 ms sleep on a 32 MiB vector read and written, on 2
// in-process ranks. With the round trip recorded, the model would be the
// proxies' mean busy time; it holds no less than the codelet's own
// times on rank 1, and at least the transfers' floor below the round
// trip.
func TestMasterModelTime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	dir := t.TempDir()
	var res modelTimeResult
	computed := make([]atomic.Int64, 2)
	require.NoError(t, local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		return runModelTime(ctx, c, dir, &res, &computed[c.Rank()])
	}))
	checkModelTime(t, res)
	assert.Zero(t, computed[0].Load(), "the master's cores ran tasks")
	meanCompute := time.Duration(computed[1].Load() / modelTimeTasks)
	assert.GreaterOrEqual(t, res.model, meanCompute, "the model holds less than the codelet's mean time on rank 1")
}
