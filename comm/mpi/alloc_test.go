//go:build mpi && !race

package mpi_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
)

// TestPersistentRoundAllocatesNothing: a round of a persistent send and
// receive (each rank to itself: MPI_Start, MPI_Wait through
// comm.WaitAllInto) allocates nothing, its request being the persistent
// operation's own, reset every round. (Not under -race, whose sync.Pool
// drops items.)
func TestPersistentRoundAllocatesNothing(t *testing.T) {
	c := splitAll(t)
	me := c.Rank()
	ctx := context.Background()
	out, in := []float64{1}, []float64{0}
	recv, err := comm.RecvInit(c, in, me, 3)
	require.NoError(t, err)
	send, err := comm.SendInit(c, out, me, 3)
	require.NoError(t, err)
	defer func() { require.NoError(t, errors.Join(recv.Free(), send.Free())) }()
	reqs, sts := make([]comm.Request, 2), make([]comm.Status, 2)
	var errs []error
	bad := 0
	round := func() {
		out[0]++
		errs = append(errs[:0], comm.StartAll(recv, send))
		reqs[0], reqs[1] = recv, send
		errs = append(errs, comm.WaitAllInto(ctx, reqs, sts))
		if sts[0] != (comm.Status{Source: me, Tag: 3, Count: 1}) || out[0] != in[0] {
			bad++
		}
	}
	round()
	errs = make([]error, 0, 4)
	assert.Zero(t, testing.AllocsPerRun(200, round), "allocations per persistent round")
	require.NoError(t, errors.Join(errs...))
	assert.Zero(t, bad, "rounds with a wrong status or value")
}
