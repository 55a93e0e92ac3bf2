//go:build mpi

package dist_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMPIEndedAtCheckExchange is TestEndedAtCheckExchange under MPI,
// rank 0's context ending: before, rank 0 left the exchange without
// starting it, rank 1 waited in it until the stall timeout (a minute)
// and MPI_Finalize (the test's cleanup) failed with ErrUnfinalized.
func TestMPIEndedAtCheckExchange(t *testing.T) {
	ctx, w := onTwoMPIRanks(t, "TestMPIEndedAtCheckExchange")
	if w == nil {
		return
	}
	waitErr, closeErr, err := endedAtExchange(ctx, w, 0)
	require.NoError(t, err)
	checkEndedAtExchange(t, w.Rank(), 0, waitErr, closeErr)
	assert.NoError(t, ctx.Err(), "the ranks waited until the deadline")
}
