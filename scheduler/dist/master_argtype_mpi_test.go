//go:build mpi

package dist_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
)

// TestMPIMasterArgTypes is TestMasterArgTypes under mpirun -n 2: every
// case's argument crosses to rank 1's process, whose codelet asserts its
// Go type.
func TestMPIMasterArgTypes(t *testing.T) {
	runCasesUnderMPI(t, "TestMPIMasterArgTypes", runArgCases, len(argCases()))
}

// runCasesUnderMPI is runCasesOnTwoRanks under mpirun -n 2 (name, the
// test's own name): each process checks what its rank's cores ran.
func runCasesUnderMPI(t *testing.T, name string, run func(context.Context, comm.Comm, []atomic.Int64) error, n int) {
	t.Helper()
	ctx, w := onTwoMPIRanks(t, name)
	if w == nil {
		return
	}
	ran := make([]atomic.Int64, 2)
	require.NoError(t, run(ctx, w, ran))
	checkCasesRan(t, ran, w.Rank(), n)
}
