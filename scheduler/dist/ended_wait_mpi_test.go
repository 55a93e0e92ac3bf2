//go:build mpi

package dist_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// TestMPIEndedWaitAllAfterFailure: a task fails on rank 0; once both
// ranks know the graph failed, each calls WaitAll with a context that has
// already ended. Neither may start a comparison of the graphs that the
// other never joins: Close returns and MPI finalizes (the test's cleanup)
// without a collective left running.
func TestMPIEndedWaitAllAfterFailure(t *testing.T) {
	ctx, w := onTwoMPIRanks(t, "TestMPIEndedWaitAllAfterFailure")
	if w == nil {
		return
	}
	d := oneWorkerDist(t, ctx, w)
	hs, err := onePerRank[float64](d, 1) // one float64 per rank, owned by it
	require.NoError(t, err)
	boom := &scheduler.Codelet{Name: "boom", CPU: func(*scheduler.Call) error { return errors.New("boom") }}
	if err := d.Submit(ctx, boom, dist.RW(hs[0])); err != nil {
		// Rank 1's Submit may hear of the failure already: it reports it.
		require.ErrorIs(t, err, dist.ErrRankFailed)
	}
	select {
	case <-dist.GraphFailed(d):
	case <-ctx.Done():
		t.Fatalf("rank %d never heard of the failure: %v", w.Rank(), ctx.Err())
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	waitErr := d.WaitAll(ended)
	closeErr := d.Close()
	t.Logf("rank %d: WaitAll: %v\nClose: %v", w.Rank(), waitErr, closeErr)
	assert.ErrorIs(t, waitErr, context.Canceled)
	if closeErr != nil {
		// The WaitAll that gave up did not report the failure (an ended
		// context leaves it untold): Close does, and nothing else.
		assert.ErrorContains(t, closeErr, "the graph failed, and no call of the program's reported it")
	}
	assert.NoError(t, ctx.Err(), "the ranks waited until the deadline")
	// MPI finalizes in the test's cleanup (onTwoMPIRanks): it fails with
	// ErrUnfinalized if a comparison started on one rank only.
}

// TestMPIEndedWaitAllMeetsStartedComparison is
// TestEndedWaitAllMeetsStartedComparison under MPI: rank 1's WaitAll
// starts the comparison of the ranks' graphs; once it has (rank 0 asks
// it), rank 0 calls WaitAll with a context that has ended. Rank 0 leaves
// without a comparison of its own, and joins the one rank 1 started:
// else rank 1's stays running and MPI_Finalize (the test's cleanup)
// fails with ErrUnfinalized.
func TestMPIEndedWaitAllMeetsStartedComparison(t *testing.T) {
	ctx, w := onTwoMPIRanks(t, "TestMPIEndedWaitAllMeetsStartedComparison")
	if w == nil {
		return
	}
	d := oneWorkerDist(t, ctx, w)
	hs, err := onePerRank[float64](d, 1) // one float64 per rank, owned by it
	require.NoError(t, err)
	noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
	require.NoError(t, d.Submit(ctx, noop, dist.RW(hs[0])))
	var waitErr error
	if w.Rank() == 1 {
		waitErr = d.WaitAll(ctx)
		assert.ErrorIs(t, waitErr, dist.ErrRankFailed)
		assert.ErrorContains(t, waitErr, "rank 0 left WaitAll")
	} else {
		for dist.PeersReached(d)[1] < 1 && ctx.Err() == nil {
			// rank 1 has not started its comparison yet: ask again
		}
		ended, cancel := context.WithCancel(ctx)
		cancel()
		waitErr = d.WaitAll(ended)
		assert.ErrorIs(t, waitErr, context.Canceled)
	}
	closeErr := d.Close()
	t.Logf("rank %d: WaitAll: %v\nClose: %v", w.Rank(), waitErr, closeErr)
	assert.NoError(t, closeErr)
	assert.NoError(t, ctx.Err(), "the ranks waited until the deadline")
	// MPI finalizes in the test's cleanup (onTwoMPIRanks): it fails with
	// ErrUnfinalized if rank 1's comparison stayed unmatched.
}
