package dist_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// A task that the running rank's local scheduler refuses (here a codelet
// with only a CUDA implementation, on ranks without a GPU) is seen by
// that rank alone, as a Register with the wrong length is: the graph
// fails on every rank, naming the submission, instead of the other ranks
// waiting for data the refused task would have written. Found by a
// new-user trial (helper-131): rank 1's Submit returned the refusal, but
// rank 0, which recorded rank 1 as the writer of "h", waited in WaitAll
// for rank 1 to send it until its context ended (PZ_DIST_TIMEOUT, 10
// minutes by default, under runtimeview), and rank 1 waited for rank 0
// in the agreement on the outcome.
func TestLocalRefusalFailsTheGraph(t *testing.T) {
	gpuOnly := &scheduler.Codelet{Name: "gpuonly", CUDA: func(*scheduler.CUDACall) error { return nil }}
	subErrs, waitErrs := make([]error, 2), make([]error, 2)
	err := runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
		var mem []float64
		if d.Rank() == 0 {
			mem = make([]float64, 1)
		}
		h, err := dist.Register(d, 0, mem, 1, 1, scheduler.Named("h"))
		if err != nil {
			return err
		}
		// The program goes on to WaitAll whatever Submit said, as a
		// program that logs errors and returns WaitAll's does.
		subErrs[d.Rank()] = d.Submit(ctx, gpuOnly, dist.RW(h), dist.OnRank(1))
		// Bounded, so that the old behaviour fails the test rather than
		// hanging it: the failure is known at once.
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		waitErrs[d.Rank()] = d.WaitAll(wctx)
		return nil
	})
	require.NoError(t, err)
	require.Error(t, subErrs[1])
	assert.ErrorIs(t, subErrs[1], scheduler.ErrNoImplementation)
	assert.Contains(t, subErrs[1].Error(), `dist: rank 1: task "gpuonly" of submission #0: RW("h"): scheduler: no implementation`)
	for r, e := range waitErrs {
		require.ErrorIs(t, e, dist.ErrRankFailed, "rank %d", r)
		assert.NotErrorIs(t, e, context.DeadlineExceeded, "rank %d", r)
		assert.Contains(t, e.Error(), `rank 1: task "gpuonly" of submission #0: RW("h"): `, "rank %d", r)
		assert.Contains(t, e.Error(), "no implementation", "rank %d", r)
	}
}
