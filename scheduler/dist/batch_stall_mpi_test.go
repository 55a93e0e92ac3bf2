//go:build mpi

package dist_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// TestMPIBatchComparisonStallLeavesTheGraph is
// TestBatchComparisonStallLeavesTheGraph (Submit) under MPI: rank 0's
// comparison at the end of its second window stalls while rank 1 has
// submitted nothing; rank 0 leaves the graph in that Submit, so that
// its WaitAll returns at once and rank 1, which hears it, names the
// Submit rank 0 left.
func TestMPIBatchComparisonStallLeavesTheGraph(t *testing.T) {
	ctx, w := onTwoMPIRanks(t, "TestMPIBatchComparisonStallLeavesTheGraph")
	if w == nil {
		return
	}
	d, tiles := stallingTiles(t, ctx, w)
	noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
	const cause = "the comparison of the ranks' graphs did not complete in 300ms"
	if w.Rank() == 0 {
		var submitErr error
		for range 2 * dist.CheckWindow {
			if submitErr = d.Submit(ctx, noop, dist.RW(tiles[0][0])); submitErr != nil {
				break
			}
		}
		start := time.Now()
		waitErr := d.WaitAll(ctx)
		took := time.Since(start)
		t.Logf("rank 0: Submit: %v\nWaitAll (%v): %v", submitErr, took, waitErr)
		assert.ErrorIs(t, submitErr, dist.ErrStalled)
		assert.ErrorContains(t, waitErr, "the graph failed when this rank (rank 0) left Submit")
		assert.ErrorContains(t, waitErr, cause)
	} else {
		select {
		case <-dist.GraphFailed(d):
		case <-ctx.Done():
		}
		waitErr := d.WaitAll(ctx)
		t.Logf("rank 1: WaitAll: %v", waitErr)
		assert.ErrorIs(t, waitErr, dist.ErrRankFailed)
		assert.ErrorContains(t, waitErr, "rank 0 left Submit")
		assert.ErrorContains(t, waitErr, cause)
	}
	assert.NoError(t, d.Close(), "Close: the failure was told")
	assert.NoError(t, ctx.Err(), "the ranks waited until the deadline")
}

// TestMPIGivenUpComparisonJoinedAtClose is
// TestGivenUpComparisonJoinedAtClose (Submit) under MPI: rank 0's
// comparison at the end of its second window stalls while rank 1 has
// submitted nothing, and rank 0 gives it up and leaves the graph; rank
// 1, once it heard that the graph failed, closes without WaitAll. Its
// Close joins the comparison rank 0 started: else that one stays
// running on rank 0, and MPI_Finalize (the test's cleanup) fails with
// ErrUnfinalized.
func TestMPIGivenUpComparisonJoinedAtClose(t *testing.T) {
	ctx, w := onTwoMPIRanks(t, "TestMPIGivenUpComparisonJoinedAtClose")
	if w == nil {
		return
	}
	d, tiles := stallingTiles(t, ctx, w)
	noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
	if w.Rank() == 0 {
		var submitErr error
		for range 2 * dist.CheckWindow {
			if submitErr = d.Submit(ctx, noop, dist.RW(tiles[0][0])); submitErr != nil {
				break
			}
		}
		assert.ErrorIs(t, submitErr, dist.ErrStalled)
		assert.ErrorContains(t, d.WaitAll(ctx), "the graph failed when this rank (rank 0) left Submit")
	} else {
		select {
		case <-dist.GraphFailed(d):
		case <-ctx.Done():
		}
	}
	assert.NoError(t, d.Close(), "rank %d's Close", w.Rank())
	assert.NoError(t, ctx.Err(), "the ranks waited until the deadline")
}
