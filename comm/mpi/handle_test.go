//go:build mpi

package mpi_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/comm/mpi"
	"github.com/pzgo/pz/internal/mpiclib"
)

// TestImportExport passes communicators both ways between pz and a C
// library (internal/mpiclib): pz imports one the library made (by C and
// by Fortran handle) and the library communicates on pz's world.
func TestImportExport(t *testing.T) {
	ctx := context.Background()
	me, n := world.Rank(), world.Size()
	h, crank, csize, err := mpiclib.Split(2)
	require.NoError(t, err)

	// The library's communicator in pz: same ranks, usable collectives.
	c, err := world.Import(ctx, h)
	require.NoError(t, err)
	assert.Equal(t, crank, c.Rank())
	assert.Equal(t, csize, c.Size())
	assert.NotEqual(t, h, c.Handle(), "pz works on a duplicate")
	got, err := comm.AllReduce(ctx, comm.Comm(c), []int64{int64(me)}, comm.Sum)
	require.NoError(t, err)
	want := 0
	for r := me % 2; r < n; r += 2 {
		want += r
	}
	assert.Equal(t, int64(want), got[0])
	parts, err := comm.AllGather(ctx, comm.Comm(c), []int32{int32(me)})
	require.NoError(t, err)
	for r, p := range parts {
		// The library ordered its ranks by descending world rank.
		assert.Equal(t, int32(me%2+2*(csize-1-r)), p[0], "part %d", r)
	}

	cf, err := world.ImportFortran(ctx, mpiclib.Fortran(h))
	require.NoError(t, err)
	assert.Equal(t, crank, cf.Rank())
	sum, err := comm.AllReduce(ctx, comm.Comm(cf), []int32{1}, comm.Sum)
	require.NoError(t, err)
	assert.Equal(t, int32(csize), sum[0])

	// pz's world in the library, by C and by Fortran handle.
	wh, err := mpi.HandleOf(world)
	require.NoError(t, err)
	assert.Equal(t, world.Handle(), wh)
	s, err := mpiclib.Sum(wh, me+1)
	require.NoError(t, err)
	assert.Equal(t, n*(n+1)/2, s)
	wf, err := mpi.FortranOf(world)
	require.NoError(t, err)
	s, err = mpiclib.SumFortran(wf, 1)
	require.NoError(t, err)
	assert.Equal(t, n, s)
	// And a communicator pz made.
	s, err = mpiclib.Sum(c.Handle(), 1)
	require.NoError(t, err)
	assert.Equal(t, csize, s)

	// Freeing pz's duplicates leaves the library's communicator working.
	require.NoError(t, c.Free())
	require.NoError(t, cf.Free())
	s, err = mpiclib.Sum(h, 2)
	require.NoError(t, err)
	assert.Equal(t, 2*csize, s)
	require.NoError(t, mpiclib.Free(h))
}

// TestImportBadHandles feeds Import MPI_COMM_NULL and the handle helpers a
// communicator of another backend.
func TestImportBadHandles(t *testing.T) {
	_, err := world.Import(context.Background(), mpiclib.Null())
	assert.ErrorIs(t, err, comm.ErrInvalidArg)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = world.Import(ctx, world.Handle())
	assert.ErrorIs(t, err, context.Canceled)

	comms, err := local.New(1)
	require.NoError(t, err)
	defer comms[0].Free()
	_, err = mpi.HandleOf(comms[0])
	assert.ErrorIs(t, err, comm.ErrInvalidArg)
	_, err = mpi.FortranOf(comms[0])
	assert.ErrorIs(t, err, comm.ErrInvalidArg)
}
