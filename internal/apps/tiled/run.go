package tiled

import (
	"context"
	"fmt"
	"time"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/internal/linalg"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler/dist"
)

// Release calls release and, when it fails while *err is nil, sets *err
// to its error after prefix ("cholesky: closing the scheduler"): how a
// run's deferred teardown (its scheduler, GPU libraries, pinned memory)
// reports a failure without hiding an earlier error.
//
//	defer tiled.Release(&err, "gemm: releasing the GPU libraries", g.Close)
func Release(err *error, prefix string, release func() error) {
	if rerr := release(); rerr != nil && *err == nil {
		*err = fmt.Errorf("%s: %w", prefix, rerr)
	}
}

// PrepareDist is what every tiled app's RunDist does first: Prepare, then
// PrepareGrid over rt's ranks. It returns RanksHere(rt), which the app's
// memory check needs.
func PrepareDist(rt *runtimeview.RuntimeView, n, b int, precision *int, seed *uint64, workers, warmup int, p, q *int) (here int, root bool, err error) {
	if err := Prepare(n, b, precision, seed, workers, warmup); err != nil {
		return 0, false, err
	}
	if err := PrepareGrid(rt.Size(), p, q); err != nil {
		return 0, false, err
	}
	here, root = RanksHere(rt)
	return here, root, nil
}

// Totals are a distributed run's figures over every rank: the slowest
// rank's time, and the sums of the messages and bytes the ranks sent and
// of their device figures.
type Totals struct {
	Elapsed   time.Duration
	Messages  int64
	BytesSent int64
	Devices   Devices
}

// SumRanks returns the Totals of this rank's elapsed time, sent (what it
// sent during the run: the difference of two dist.Stats) and dev (its
// devices' figures during the run) with every other rank's. Every rank
// must call it; each gets the same Totals. Devices.Pinned is not summed:
// it is false.
func SumRanks(ctx context.Context, c comm.Comm, elapsed time.Duration, sent dist.Stats, dev Devices) (Totals, error) {
	secs, err := comm.AllReduce(ctx, c, []float64{elapsed.Seconds()}, comm.Max)
	if err != nil {
		return Totals{}, err
	}
	sums, err := comm.AllReduce(ctx, c, []int64{sent.MessagesSent, sent.BytesSent,
		int64(dev.Devices), dev.DeviceTasks, dev.DeviceBytes, dev.Evictions, dev.WriteBacks}, comm.Sum)
	if err != nil {
		return Totals{}, err
	}
	return Totals{
		Elapsed:  time.Duration(secs[0] * float64(time.Second)),
		Messages: sums[0], BytesSent: sums[1],
		Devices: Devices{Devices: int(sums[2]), DeviceTasks: sums[3], DeviceBytes: sums[4], Evictions: sums[5], WriteBacks: sums[6]},
	}, nil
}

// Sent returns what a rank sent between its scheduler's statistics
// before and after.
func Sent(before, after dist.Stats) dist.Stats {
	return dist.Stats{MessagesSent: after.MessagesSent - before.MessagesSent, BytesSent: after.BytesSent - before.BytesSent}
}

// Collect gathers an n×n matrix's tiles into one row-major matrix on
// rank 0 (dist.GatherMatrix) and returns it there; the other ranks
// return nil. Every rank must call it.
func Collect[T linalg.Float](ctx context.Context, d *dist.Scheduler, tiles [][]*dist.Handle, n int) ([]T, error) {
	var m []T
	if d.Rank() == 0 {
		m = make([]T, n*n)
	}
	if err := dist.GatherMatrix(ctx, d, 0, m, n, n, tiles); err != nil {
		return nil, err
	}
	return m, nil
}
