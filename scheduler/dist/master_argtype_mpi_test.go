//go:build mpi

package dist_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm/mpi"
	"github.com/pzgo/pz/internal/launch"
)

// TestMPIMasterArgTypes is TestMasterArgTypes under mpirun -n 2: every
// case's argument crosses to rank 1's process, whose codelet asserts its
// Go type.
func TestMPIMasterArgTypes(t *testing.T) {
	const name = "TestMPIMasterArgTypes"
	if !launch.Detect(os.Getenv).Launched() {
		runUnderMPI(t, name, 2, 2*time.Minute)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := mpi.Init(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, w.Finalize()) })
	ran := make([]atomic.Int64, 2)
	require.NoError(t, runArgCases(ctx, w, ran))
	if w.Rank() == 1 {
		assert.Equal(t, int64(len(argCases())), ran[1].Load(), "tasks run on rank 1")
	} else {
		assert.Equal(t, int64(0), ran[0].Load(), "tasks ran on the master's cores")
	}
}
