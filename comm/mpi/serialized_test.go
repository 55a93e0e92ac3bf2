//go:build mpi

package mpi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/mpi"
)

// TestWorldsOnOneMPISerializeTogether: a second World on an MPI at
// MPI_THREAD_SERIALIZED (runtimeview adopts the MPI a World of the
// program uses) must not call MPI while the first does. Each World took
// a lock of its own, so two goroutines, one per World, called MPI at
// once, which that thread level forbids. Both Worlds then make a
// collective each, from two goroutines at once.
func TestWorldsOnOneMPISerializeTogether(t *testing.T) {
	if !serialized() {
		t.Skipf("needs an MPI at MPI_THREAD_SERIALIZED (%s=1)", serializedEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w2, err := mpi.Init(ctx, mpi.WithGOMAXPROCS(false))
	require.NoError(t, err)
	defer func() { require.NoError(t, w2.Finalize()) }()
	require.True(t, mpi.Serialized(w2))
	require.True(t, mpi.SerializedTogether(world, w2), "the second World's MPI calls do not wait for the first's")
	require.True(t, mpi.SerializedTogether(w2, world), "the first World's MPI calls do not wait for the second's")
	// A communicator of each World (collectives on one communicator
	// from two goroutines at once would be erroneous in MPI).
	var cs []comm.Comm
	for _, w := range []*mpi.World{world, w2} {
		d, err := w.Dup(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, d.Free()) }()
		cs = append(cs, d)
	}
	errs := make(chan error, len(cs))
	for _, c := range cs {
		go func() {
			for range 20 {
				sum, err := comm.AllReduce(ctx, c, []int64{1}, comm.Sum)
				if err == nil && sum[0] != int64(c.Size()) {
					err = fmt.Errorf("sum %d, want %d", sum[0], c.Size())
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range cs {
		require.NoError(t, <-errs)
	}
}

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

// TestImportAbandonedByOneRank: on an MPI at MPI_THREAD_SERIALIZED,
// rank 0's Import ends (its context) before rank 1 has called Import.
// Its MPI_Ibarrier stayed pending; rank 1's barrier then completed, it
// went on into MPI_Comm_dup under the lock of every MPI call and waited
// there for good. Now rank 1's Import fails with ErrImportAbandoned (no
// rank makes MPI_Comm_dup), and an Import that every rank calls again
// works. The imported communicator is one nothing else uses, so the
// barrier and vote rank 0 left pending meet rank 1's.
func TestImportAbandonedByOneRank(t *testing.T) {
	if !serialized() {
		t.Skipf("needs an MPI at MPI_THREAD_SERIALIZED (%s=1)", serializedEnv)
	}
	if world.Size() < 2 {
		t.Skip("needs 2 ranks")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lib := splitAll(t) // the library's communicator, given to Import
	sig := splitAll(t) // rank 0 tells the others it gave up
	me := lib.Rank()
	if me == 0 {
		short, stop := context.WithTimeout(ctx, 100*time.Millisecond)
		_, err := world.Import(short, lib.Handle())
		stop()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "not every rank had called Import")
		for r := 1; r < sig.Size(); r++ {
			require.NoError(t, comm.Send(ctx, sig, []int64{1}, r, 9))
		}
	} else {
		_, err := comm.Recv(ctx, sig, []int64{0}, 0, 9)
		require.NoError(t, err)
		_, err = world.Import(ctx, lib.Handle())
		require.ErrorIs(t, err, mpi.ErrImportAbandoned, "rank %d", me)
	}
	// Every rank calls Import again: it works.
	d, err := world.Import(ctx, lib.Handle())
	require.NoError(t, err, "rank %d", me)
	sum, err := comm.AllReduce(ctx, d, []int64{1}, comm.Sum)
	require.NoError(t, err)
	require.Equal(t, int64(d.Size()), sum[0])
	require.NoError(t, d.Free())
}
