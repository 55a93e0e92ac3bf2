//go:build mpi

package mpi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/mpi"
)

// TestCommMadeAbandonedByOneRank: rank 0's Dup (Split, SplitShared) ends
// (its context) before the other ranks call it. The ranks meet first in
// a polled barrier (with the check on, an agreement step) before the
// blocking MPI_Comm_dup (split, split_type); rank 0's stayed pending, the
// others' then completed and they went into the blocking call and waited
// there for good (on a serialized MPI holding the lock of every MPI
// call). A vote that every rank is still there now follows the barrier or
// the agreement step, and their call fails with ErrAbandoned and
// comm.ErrBroken, as rank 0's with its context's error and
// comm.ErrBroken, and a later call on the communicator returns
// comm.ErrBroken on every rank. Runs with the check off and on, rank 0's
// context ending in its call or before it; the others wait for rank 0's
// message saying it gave up, with a context that can end, which makes the
// calls polled also on an MPI at MPI_THREAD_MULTIPLE.
//
// In the blocking form (WithBlocking, PZ_COMM_BLOCKING=1) the ranks run
// no polled step and no vote: a ctx is looked at before each MPI call
// only, and the others of a rank that gives up wait inside MPI until
// WithTimeout ends the job; the test is skipped.
func TestCommMadeAbandonedByOneRank(t *testing.T) {
	if world.Size() < 2 {
		t.Skip("needs 2 ranks")
	}
	ops := []struct {
		name string
		k    string // the name its errors give the call
		call func(ctx context.Context, c *mpi.Comm) (comm.Comm, error)
	}{
		{"Dup", "Dup", func(ctx context.Context, c *mpi.Comm) (comm.Comm, error) { return c.Dup(ctx) }},
		{"Split", "Split", func(ctx context.Context, c *mpi.Comm) (comm.Comm, error) { return c.Split(ctx, 0, c.Rank()) }},
		{"SplitShared", "SplitShared", func(ctx context.Context, c *mpi.Comm) (comm.Comm, error) { return c.SplitShared(ctx, 0) }},
	}
	for _, check := range []bool{false, true} {
		for _, early := range []bool{false, true} {
			for _, op := range ops {
				t.Run(fmt.Sprintf("%s/check=%v/ended-before=%v", op.name, check, early), func(t *testing.T) {
					abandonCommMake(t, op.k, op.call, check, early)
				})
			}
		}
	}
}

// skipBlockingCtx says why a test of a ctx ending inside a collective is
// skipped in the blocking form.
const skipBlockingCtx = "the blocking form (WithBlocking, PZ_COMM_BLOCKING=1) looks at a ctx before each MPI call only: a rank whose ctx ends leaves the others inside MPI until WithTimeout ends the job (comm/mpi doc, # Context; docs/backends.md, Blocking or non-blocking collectives)"

// abandonCommMake is one case of TestCommMadeAbandonedByOneRank: rank 0
// gives up on call (named k in its errors), its context ending in the
// call or, with early, before it.
func abandonCommMake(t *testing.T, k string, call func(ctx context.Context, c *mpi.Comm) (comm.Comm, error), check, early bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := splitAll(t) // the communicator the op is abandoned on
	if c.Blocking() {
		// The others enter MPI_Comm_split (dup, split_type), or the
		// blocking agreement step, and stay there: rank 0 makes no MPI
		// call once its ctx has ended, nor gives up inside one.
		t.Skip(skipBlockingCtx)
	}
	sig := splitAll(t) // rank 0 tells the others it gave up
	c.SetCheck(check)
	me := c.Rank()
	if me == 0 {
		short, stop := context.WithTimeout(ctx, 100*time.Millisecond)
		want := context.DeadlineExceeded
		if early {
			stop()
			want = context.Canceled
		}
		_, err := call(short, c)
		stop()
		require.ErrorIs(t, err, want)
		require.ErrorIs(t, err, comm.ErrBroken)
		require.Contains(t, err.Error(), "not every rank had called "+k)
		for r := 1; r < sig.Size(); r++ {
			require.NoError(t, comm.Send(ctx, sig, []int64{1}, r, 9))
		}
	} else {
		_, err := comm.Recv(ctx, sig, []int64{0}, 0, 9)
		require.NoError(t, err)
		_, err = call(ctx, c)
		require.ErrorIs(t, err, mpi.ErrAbandoned, "rank %d", me)
		require.ErrorIs(t, err, comm.ErrBroken, "rank %d", me)
	}
	_, err := call(ctx, c)
	require.ErrorIs(t, err, comm.ErrBroken, "rank %d", me)
	// The world still works on every rank.
	sum, err := comm.AllReduce(ctx, sig, []int64{1}, comm.Sum)
	require.NoError(t, err)
	require.Equal(t, int64(sig.Size()), sum[0])
}
