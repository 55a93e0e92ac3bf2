//go:build mpi

package mpi_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
		require.NoError(t, d.Free())
	}
}
