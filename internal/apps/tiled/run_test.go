package tiled

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler/dist"
)

// Release reports a teardown's failure after its prefix, unless an
// earlier error stands.
func TestRelease(t *testing.T) {
	boom := errors.New("boom")
	var err error
	Release(&err, "gemm: closing the scheduler", func() error { return nil })
	require.NoError(t, err)
	Release(&err, "gemm: closing the scheduler", func() error { return boom })
	require.ErrorIs(t, err, boom)
	assert.Equal(t, "gemm: closing the scheduler: boom", err.Error())
	first := err
	called := false
	Release(&err, "gemm", func() error { called = true; return errors.New("later") })
	assert.True(t, called, "the release runs after an earlier error too")
	assert.Same(t, first, err, "the earlier error stands")
}

// On three in-process ranks, SumRanks gives every rank the slowest
// rank's time and the sums of the counts; Collect gathers a tiled matrix
// on rank 0 only; PrepareDist fills the grid and counts the ranks here.
func TestSumRanksAndCollect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const ranks, n, b = 3, 6, 2
	got := make([]Totals, ranks)
	var whole []float64
	err := runtimeview.RunLocal(ctx, ranks, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		r := rt.Rank()
		precision, seed, p, q := 0, uint64(0), 0, 0
		here, root, err := PrepareDist(rt, n, b, &precision, &seed, 0, 0, &p, &q)
		if err != nil {
			return err
		}
		assert.Equal(t, []any{32, uint64(1), ranks, true, ranks}, []any{precision, seed, here, root, p * q})
		sent := Sent(dist.Stats{MessagesSent: 1, BytesSent: 10}, dist.Stats{MessagesSent: 1 + int64(r), BytesSent: 10 + 100*int64(r)})
		dev := Devices{Devices: 1, DeviceTasks: int64(r), DeviceBytes: 2, Evictions: 3, WriteBacks: 4, Pinned: true}
		if got[r], err = SumRanks(ctx, rt.Comm(), time.Duration(r+1)*time.Second, sent, dev); err != nil {
			return err
		}
		d, err := rt.Scheduler(ctx)
		if err != nil {
			return err
		}
		grid := dist.BlockCyclic2D(p, q)
		tiles := make([][]*dist.Handle, n/b)
		for i := range n / b {
			tiles[i] = make([]*dist.Handle, n/b)
			for j := range n / b {
				var data []float64
				if grid.Owner(i, j) == r {
					data = make([]float64, b*b)
					for k := range data {
						data[k] = float64((i*b+k/b)*n + j*b + k%b)
					}
				}
				if tiles[i][j], err = dist.Register(d, grid.Owner(i, j), data, b, b); err != nil {
					return err
				}
			}
		}
		m, err := Collect[float64](ctx, d, tiles, n)
		if err != nil {
			return err
		}
		if r == 0 {
			whole = m
		} else {
			assert.Nil(t, m, "rank %d", r)
		}
		return nil
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()))
	require.NoError(t, err)
	want := Totals{Elapsed: 3 * time.Second, Messages: 0 + 1 + 2, BytesSent: 0 + 100 + 200,
		Devices: Devices{Devices: 3, DeviceTasks: 0 + 1 + 2, DeviceBytes: 6, Evictions: 9, WriteBacks: 12}}
	for r := range ranks {
		assert.Equal(t, want, got[r], "rank %d", r)
	}
	require.Len(t, whole, n*n)
	for k, v := range whole {
		require.Equal(t, float64(k), v, "entry %d", k)
	}
}
