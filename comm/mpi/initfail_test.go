//go:build mpi

package mpi_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/mpi"
)

// TestFailedInitLeavesMPIAsItWas: an Init that fails on an MPI already
// initialized (adopted; under SERIALIZED=1 the program's own) must leave
// MPI as it found it. A failure past the making of Init's types, ops,
// engine communicator and error-handler reference returned without
// freeing them: the reference to MPI_COMM_WORLD's saved handler (errh.c)
// stayed held, so the world would never get its owner's handler back.
// Then an Init that succeeds still works and ends cleanly.
func TestFailedInitLeavesMPIAsItWas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	refs, fatal := mpi.ErrhRefs(), mpi.WorldErrorsFatal()
	injected := errors.New("injected failure")
	cases := []struct {
		name string
		opt  mpi.Option
		want string
	}{
		{"invalid PZ_COMM_TIMEOUT", mpi.WithGetenv(func(k string) string {
			if k == "PZ_COMM_TIMEOUT" {
				return "soon"
			}
			return ""
		}), "PZ_COMM_TIMEOUT"},
		{"failure after the node split", mpi.WithInitFault(func(string) error { return injected }), injected.Error()},
	}
	for _, tc := range cases {
		w, err := mpi.Init(ctx, mpi.WithGOMAXPROCS(false), tc.opt)
		require.Error(t, err, tc.name)
		require.Nil(t, w, tc.name)
		assert.Contains(t, err.Error(), tc.want, tc.name)
		assert.Equal(t, refs, mpi.ErrhRefs(), "%s: references to MPI_COMM_WORLD's error handler after the failed Init", tc.name)
		assert.Equal(t, fatal, mpi.WorldErrorsFatal(), "%s: MPI_COMM_WORLD's error handler changed", tc.name)
	}
	w, err := mpi.Init(ctx, mpi.WithGOMAXPROCS(false))
	require.NoError(t, err)
	sum, err := comm.AllReduce(ctx, w, []int64{1}, comm.Sum)
	require.NoError(t, err)
	require.Equal(t, int64(w.Size()), sum[0])
	assert.Equal(t, refs+1, mpi.ErrhRefs(), "the World of the Init that succeeded holds one reference")
	require.NoError(t, w.Finalize())
	assert.Equal(t, refs, mpi.ErrhRefs())
	assert.Equal(t, fatal, mpi.WorldErrorsFatal())
}
