//go:build mpi

package mpi_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/mpi"
)

// TestBlockingReportsForm: Blocking says which form a communicator's
// collectives take - the World's from PZ_COMM_BLOCKING at Init, a
// communicator's own once set, inherited by a Dup - and false at
// MPI_THREAD_SERIALIZED, where collectives are always polled. (A program,
// and pzrun bench comm, could not tell which form it measured.)
func TestBlockingReportsForm(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := false
	switch os.Getenv("PZ_COMM_BLOCKING") {
	case "1", "true", "on", "yes":
		env = true
	}
	require.Equal(t, env && !serialized(), world.Blocking(), "the World's form (PZ_COMM_BLOCKING=%q)", os.Getenv("PZ_COMM_BLOCKING"))
	for _, on := range []bool{true, false} {
		c := splitAll(t)
		mpi.SetBlocking(c, on)
		require.Equal(t, on && !serialized(), c.Blocking(), "after SetBlocking(%v)", on)
		d, err := c.Dup(ctx)
		require.NoError(t, err)
		require.Equal(t, on && !serialized(), d.(*mpi.Comm).Blocking(), "a Dup of a communicator with blocking=%v", on)
		require.Equal(t, !serialized(), mpi.EngineBlocking(d.(*mpi.Comm)), "the engine of a Dup of a communicator with blocking=%v", on)
		require.NoError(t, d.Free())
	}
}

// TestEngineTakesBlockingForm: the engine of non-blocking collectives
// (Ibarrier, Iallreduce...) runs them on its private duplicate with
// context.Background on every rank, and its duplicate takes MPI's
// blocking functions whatever the communicator's form (but at
// MPI_THREAD_SERIALIZED), as comm.NewNBCBlocking promises. Since the
// form became the communicator's (WithBlocking), the duplicate inherited
// the default non-blocking form, and the engine's collectives went
// through MPI_Iallreduce and MPI_Wait. The collectives it runs still
// complete in either form of the communicator.
func TestEngineTakesBlockingForm(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.Equal(t, !serialized(), mpi.EngineBlocking(world.Comm), "the World's engine")
	for _, on := range []bool{false, true} {
		c := splitAll(t) // made with the World's form
		mpi.SetBlocking(c, on)
		require.Equal(t, !serialized(), mpi.EngineBlocking(c), "the engine of a communicator with blocking=%v", on)
		sum := make([]int64, 1)
		req, err := c.Iallreduce(comm.BufOf([]int64{1}), comm.BufOf(sum), comm.Sum)
		require.NoError(t, err)
		_, err = req.Wait(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(c.Size()), sum[0])
		req, err = c.Ibarrier()
		require.NoError(t, err)
		_, err = req.Wait(ctx)
		require.NoError(t, err)
	}
}
