//go:build mpi

package mpi_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/mpi"
)

// TestP2PErrorsName: the errors of the point-to-point calls name the
// call, the rank, the peer and the tag, as comm/local's do, on the
// blocking path (one MPI call: MPI_Recv, MPI_Sendrecv) and the polled one
// (matched probe, or Isend and a receive). A truncated message wraps
// comm.ErrTruncated and says both sizes, whether MPI reported it
// (MPI_ERR_TRUNCATE: a blocking Recv, a persistent receive from another
// rank) or pz saw it; a truncated Sendrecv says Sendrecv; a message of
// another datatype wraps comm.ErrMismatch with a point-to-point message,
// not a collective's *comm.MismatchError.
func TestP2PErrorsName(t *testing.T) {
	c := splitAll(t)
	n, me := c.Size(), c.Rank()
	if n < 2 {
		t.Skip("MPI reports truncation of another rank's message")
	}
	right, left := (me+1)%n, (me+n-1)%n
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, mode := range []struct {
		name string
		ctx  context.Context
	}{{"blocking", context.Background()}, {"polled", ctx}} {
		t.Run(mode.name, func(t *testing.T) {
			cx := mode.ctx
			var sends []comm.Request
			for _, tag := range []int{1, 2, 3, 4} {
				r, err := comm.Isend(c, []float64{1, 2, 3}, right, tag)
				require.NoError(t, err)
				sends = append(sends, r)
			}
			for _, tag := range []int{5, 6} {
				r, err := comm.Isend(c, []int8{1, 2, 3}, right, tag)
				require.NoError(t, err)
				sends = append(sends, r)
			}
			truncated := func(call string, tag int, st comm.Status, err error, peers string) {
				t.Helper()
				require.ErrorIs(t, err, comm.ErrTruncated, call)
				assert.ErrorContains(t, err, fmt.Sprintf("mpi: %s on rank %d %s: comm: message larger than receive buffer: message from rank %d has ", call, me, peers, left))
				assert.Equal(t, left, st.Source, call)
				assert.Equal(t, tag, st.Tag, call)
				if mpi.Library() == "openmpi" { // MPICH does not say a truncated message's size
					assert.ErrorContains(t, err, "has 3 elements, buffer holds 2", call)
					assert.Equal(t, 3, st.Count, call)
				}
			}
			st, err := comm.Recv(cx, c, make([]float64, 2), left, 1)
			truncated("Recv", 1, st, err, fmt.Sprintf("from rank %d tag 1", left))

			r, err := comm.Irecv(c, make([]float64, 2), left, 2)
			require.NoError(t, err)
			st, err = r.Wait(cx)
			truncated("Irecv", 2, st, err, fmt.Sprintf("from rank %d tag 2", left))

			p, err := comm.RecvInit(c, make([]float64, 2), left, 3)
			require.NoError(t, err)
			require.NoError(t, p.Start())
			st, err = p.Wait(cx)
			truncated("RecvInit", 3, st, err, fmt.Sprintf("from rank %d tag 3", left))
			assert.ErrorContains(t, err, comm.ErrTruncated.Error())
			require.NoError(t, p.Free())

			st, err = comm.Sendrecv(cx, c, []float64{7}, right, 9, make([]float64, 2), left, 4)
			truncated("Sendrecv", 4, st, err, fmt.Sprintf("to rank %d tag 9, from rank %d tag 4", right, left))
			assert.NotContains(t, err.Error(), "Recv on", "Sendrecv's error names Sendrecv")
			_, err = comm.Recv(cx, c, make([]float64, 1), left, 9)
			require.NoError(t, err)

			mismatch := func(call string, tag int, err error) {
				t.Helper()
				require.ErrorIs(t, err, comm.ErrMismatch, call)
				var mm *comm.MismatchError
				assert.False(t, errors.As(err, &mm), "%s: a point-to-point mismatch is no collective's *comm.MismatchError: %v", call, err)
				assert.ErrorContains(t, err, fmt.Sprintf("mpi: %s on rank %d from rank %d tag %d: comm: arguments do not match: datatype of the message from rank %d (tag %d): its 3 bytes are not a whole number of int32", call, me, left, tag, left, tag))
				assert.NotContains(t, err.Error(), "differ across ranks", call)
			}
			_, err = comm.Recv(cx, c, make([]int32, 2), left, 5)
			mismatch("Recv", 5, err)
			r, err = comm.Irecv(c, make([]int32, 2), left, 6)
			require.NoError(t, err)
			_, err = r.Wait(cx)
			mismatch("Irecv", 6, err)

			require.NoError(t, waitAllOf(cx, sends))
			require.NoError(t, c.Barrier(ctx))
		})
	}
}

func waitAllOf(ctx context.Context, reqs []comm.Request) error {
	_, err := comm.WaitAll(ctx, reqs)
	return err
}

// TestSsendDeadline: an Ssend whose context ends before a receive takes
// the message returns an error wrapping the context's that says MPI
// cannot withdraw the message (as comm.Ssend says): a later receive still
// takes it, and the communicator stays usable, so the error is no
// comm.ErrBroken.
func TestSsendDeadline(t *testing.T) {
	c := splitAll(t)
	if c.Size() < 2 {
		t.Skip("needs a peer that does not receive yet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	switch c.Rank() {
	case 0:
		short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
		err := comm.Ssend(short, c, []float64{42}, 1, 11)
		stop()
		require.Error(t, err)
		assert.NotErrorIs(t, err, comm.ErrBroken)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorContains(t, err, "mpi: Ssend on rank 0 to rank 1 tag 11: context deadline exceeded: MPI cannot withdraw a send: the message stays posted, and a later receive on rank 1 may still take it")
	}
	require.NoError(t, c.Barrier(ctx)) // rank 1 receives only once rank 0's Ssend has returned
	if c.Rank() == 1 {
		got := make([]float64, 1)
		_, err := comm.Recv(ctx, c, got, 0, 11)
		require.NoError(t, err)
		assert.Equal(t, 42.0, got[0], "the message stayed posted")
	}
	require.NoError(t, c.Barrier(ctx))
}
