//go:build !race

package local_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
)

// Allocation counts of comm/local's hot paths.
//
// Not under the race detector: its sync.Pool drops recycled messages
// and posts at random, so allocation counts mean nothing there (the
// MPI-tagged run of scripts/test.sh runs this without -race).

// A round of a persistent send and receive reuses one request each and
// allocates nothing; a one-shot Irecv and Isend allocate their requests
// only (an Irecv that completes while its rank polls makes no channel).
// Both run on one rank sending to itself, on the test's goroutine.
func TestPersistentRoundsAllocateNothing(t *testing.T) {
	c := oneRank(t)
	ctx := context.Background()
	out, in := []float64{1}, []float64{0}
	recv, err := comm.RecvInit(c, in, 0, 3)
	require.NoError(t, err)
	send, err := comm.SendInit(c, out, 0, 3)
	require.NoError(t, err)
	// The rounds record what they saw; the checks, which allocate, come
	// after.
	var errs []error
	var bad int
	reqs, sts := make([]comm.Request, 2), make([]comm.Status, 2)
	round := func() {
		out[0]++
		errs = append(errs[:0], comm.StartAll(recv, send))
		reqs[0], reqs[1] = recv, send
		errs = append(errs, comm.WaitAllInto(ctx, reqs, sts))
		if sts[0] != (comm.Status{Source: 0, Tag: 3, Count: 1}) || out[0] != in[0] {
			bad++
		}
	}
	round() // warms the message and post pools
	errs = make([]error, 0, 4)
	assert.Zero(t, testing.AllocsPerRun(200, round), "allocations per persistent round")
	require.NoError(t, errors.Join(errs...))
	assert.Zero(t, bad, "rounds with a wrong status or value")

	oneShot := func() {
		r, err := c.Irecv(comm.BufOf(in), 0, 4)
		errs = append(errs[:0], err)
		s, err := c.Isend(comm.BufOf(out), 0, 4)
		errs = append(errs, err)
		_, err = s.Wait(ctx)
		errs = append(errs, err)
		_, err = r.Wait(ctx)
		errs = append(errs, err)
	}
	oneShot()
	assert.LessOrEqual(t, testing.AllocsPerRun(200, oneShot), 2.0, "allocations per Irecv+Isend: the two requests")
	require.NoError(t, errors.Join(errs...))
	require.NoError(t, recv.Free())
	require.NoError(t, send.Free())
}

// Probe and Iprobe of a queued message copy its header into the caller's
// memory: no allocation (the message may be received and recycled as
// soon as the mailbox lock is released, so the header must be copied).
func TestProbeAllocatesNothing(t *testing.T) {
	c := oneRank(t)
	ctx := context.Background()
	s, err := c.Isend(comm.BufOf([]int64{1, 2, 3}), 0, 5)
	require.NoError(t, err)
	_, err = s.Wait(ctx)
	require.NoError(t, err)
	var ok bool
	var st comm.Status
	var errs []error
	probe := func() {
		ok, st, err = c.Iprobe(comm.Int64, 0, 5)
		errs = append(errs[:0], err)
		st, err = c.Probe(ctx, comm.Int64, comm.AnySource, comm.AnyTag)
		errs = append(errs, err)
	}
	probe()
	errs = make([]error, 0, 2)
	assert.Zero(t, testing.AllocsPerRun(200, probe), "allocations per Iprobe and Probe")
	require.NoError(t, errors.Join(errs...))
	assert.True(t, ok)
	assert.Equal(t, comm.Status{Source: 0, Tag: 5, Count: 3}, st)
	in := make([]int64, 3)
	_, err = comm.Recv(ctx, c, in, 0, 5)
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 2, 3}, in, "the probed message is still there to receive")
}
