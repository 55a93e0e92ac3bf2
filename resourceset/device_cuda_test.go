package resourceset_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
	"github.com/pzgo/pz/resourceset"
)

// TestCUDANCCLMissingOnOneRank: three in-process ranks with a GPU each of
// the stand-in driver, where NCCL loads on ranks 0 and 2 and not on rank
// 1. Rank 1 failed before ncclCommInitRank while the others waited in it
// (until the stand-in's NCCL timeout; a real NCCL waits forever); now
// every rank learns, before any joins, that rank 1 has no device
// collectives, and every rank stages, well before that timeout, with
// the right sums, making no NCCL call.
func TestCUDANCCLMissingOnOneRank(t *testing.T) {
	const ranks, m, fails = 3, 4, 1
	const ncclTimeout = 20 * time.Second
	fakecuda.SetDelay(t, 0)
	d, lib := fakecuda.Open(t, ranks, 16<<20)
	fakecuda.SetLibraries(t, lib)
	fakecuda.SetNCCLTimeout(t, ncclTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a safety net only
	defer cancel()
	gpus := make([]*cuda.Accel, ranks)
	for r := range gpus {
		a, err := d.NewAccel(ctx, r)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, a.Close()) })
		gpus[r] = a
		if r != fails { // loads NCCL on this GPU, from lib
			_, err := a.NewCollectiveID()
			require.NoError(t, err)
		}
	}
	t.Setenv(cuda.EnvNCCLLibrary, "/nonexistent/libnccl.so.2") // what rank 1's GPU loads
	before, err := fakecuda.Stats(lib)
	require.NoError(t, err)
	start := time.Now()
	err = local.Run(ctx, ranks, func(ctx context.Context, cm comm.Comm) error {
		r := cm.Rank()
		devs, err := attach(ctx, cm, gpus[r])
		if err != nil {
			return err
		}
		mine, err := filled(ctx, devs[r], seq[float64](10*r, m))
		if err != nil {
			return err
		}
		defer mine.Free()
		for round := range 2 { // the second reuses what the first decided
			if err := mine.CopyFrom(ctx, seq[float64](10*r, m)); err != nil {
				return err
			}
			if err := resourceset.AllReduceDevice(ctx, cm, mine, comm.Sum); err != nil {
				return fmt.Errorf("rank %d round %d: %w", r, round, err)
			}
			got, err := contents(ctx, mine)
			if err != nil {
				return err
			}
			if want := []float64{30, 33, 36, 39}; !slices.Equal(got, want) {
				return fmt.Errorf("rank %d round %d: AllReduceDevice gave %v, want %v", r, round, got, want)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Less(t, time.Since(start), ncclTimeout, "no rank waited in ncclCommInitRank")
	after, err := fakecuda.Stats(lib)
	require.NoError(t, err)
	require.Equal(t, before.NCCL, after.NCCL, "no NCCL call was made")
}
