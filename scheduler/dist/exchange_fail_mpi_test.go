//go:build mpi

package dist_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// TestMPICollectiveFailureIsTheGraphs is TestCollectiveFailureIsTheGraphs
// ("late", Scatter) under MPI, where abandoning a collective breaks the
// communicator on the abandoning rank only: rank 0 waits the stall
// timeout in the exchange of Scatter's arguments and gives it up; rank 1
// comes to the exchange once it has heard of that. Rank 0 recorded
// nothing and, its communicator broken, could tell nothing: rank 1 never
// heard (here it waited until the test's deadline; had it come to the
// exchange, it would have waited there for its own stall timeout). Now
// rank 0 records the stall as the graph's failure and tells rank 1
// before it abandons the exchange: every later call on both ranks
// returns at once naming the stall, and Close returns nil (the failure
// was told).
func TestMPICollectiveFailureIsTheGraphs(t *testing.T) {
	ctx, w := onTwoMPIRanks(t, "TestMPICollectiveFailureIsTheGraphs")
	if w == nil {
		return
	}
	d, tiles := stallingTiles(t, ctx, w)
	if w.Rank() == 1 {
		// Past the comparison of the graphs, which rank 0 joined, rank
		// 1 comes to the exchange once rank 0 has given it up.
		dist.BeforeExchange(d, func() {
			select {
			case <-dist.GraphFailed(d):
			case <-ctx.Done():
			}
		})
	}
	noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
	callErr := d.Scatter(ctx, 0, tiles[0], func(int, any) error { return nil })
	submitErr := d.Submit(ctx, noop, dist.RW(tiles[0][0]))
	waitErr := d.WaitAll(ctx)
	closeErr := d.Close()
	t.Logf("rank %d: Scatter: %v\nSubmit: %v\nWaitAll: %v\nClose: %v", w.Rank(), callErr, submitErr, waitErr, closeErr)
	const cause = "rank 0 waited 300ms for the other ranks to call Scatter"
	if w.Rank() == 0 {
		assert.ErrorIs(t, callErr, dist.ErrStalled)
		assert.ErrorContains(t, waitErr, "the graph failed when this rank (rank 0) left Scatter")
	} else {
		assert.ErrorIs(t, callErr, dist.ErrRankFailed)
		assert.ErrorIs(t, waitErr, dist.ErrRankFailed)
		assert.ErrorContains(t, waitErr, "rank 0 left Scatter")
	}
	assert.ErrorContains(t, callErr, cause, "Scatter")
	assert.ErrorContains(t, submitErr, cause, "Submit")
	assert.ErrorContains(t, waitErr, cause, "WaitAll")
	assert.NoError(t, closeErr, "Close: the failure was told")
	assert.NoError(t, ctx.Err(), "the ranks waited until the deadline")
}
