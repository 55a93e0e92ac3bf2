//go:build mpi

package mpi_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
)

// TestMakeCommWhileAnotherGoroutineSends: rank 0 makes a communicator
// (Dup, Split, SplitShared, the check off, Import; context.Background) while
// another of its goroutines sends to rank 1, which receives that message
// before it makes the communicator. MPI_Comm_dup and MPI_Comm_split have
// no polled form: on an MPI at MPI_THREAD_SERIALIZED (serializedEnv)
// rank 0 made them under the lock that every MPI call takes, so once it
// waited there for rank 1 its sender could not start the send rank 1
// waited for, and both ranks hung. The ranks now meet in a polled
// barrier first, as they do with the check on or a ctx that can end
// (Import: an MPI_Ibarrier on the imported communicator).
func TestMakeCommWhileAnotherGoroutineSends(t *testing.T) {
	if world.Size() < 2 {
		t.Skip("needs 2 ranks")
	}
	c := splitAll(t)
	c.SetCheck(false)
	ctx := context.Background()
	makers := []struct {
		name string
		make func() (comm.Comm, error)
	}{
		{"Dup", func() (comm.Comm, error) { return c.Dup(ctx) }},
		{"Split", func() (comm.Comm, error) { return c.Split(ctx, 0, c.Rank()) }},
		{"SplitShared", func() (comm.Comm, error) { return c.SplitShared(ctx, c.Rank()) }},
		{"Import", func() (comm.Comm, error) { return world.Import(ctx, world.Handle()) }},
	}
	for _, m := range makers {
		for i := range 5 {
			var sent chan error
			switch c.Rank() {
			case 0:
				sent = make(chan error, 1)
				go func() { sent <- comm.Send(ctx, c, []int64{int64(i)}, 1, 5) }()
			case 1:
				got := []int64{-1}
				_, err := comm.Recv(ctx, c, got, 0, 5)
				require.NoError(t, err, "%s #%d: rank 1: Recv", m.name, i)
				require.Equal(t, int64(i), got[0])
			}
			d, err := m.make()
			require.NoError(t, err, "%s #%d on rank %d", m.name, i, c.Rank())
			if sent != nil {
				require.NoError(t, <-sent, "%s #%d: rank 0: Send", m.name, i)
			}
			require.NoError(t, d.Free(), "%s #%d: Free", m.name, i)
		}
	}
}
