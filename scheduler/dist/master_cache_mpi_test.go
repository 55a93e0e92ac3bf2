//go:build mpi

package dist_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMPIMasterCache is TestMasterCacheReadOnce and TestMasterCacheLimit
// under mpirun -n 3: the 8 MiB handle travels once to each worker
// process that reads it (two slots each), again after a write by a task
// on a worker rank, by the host or by a task on the master's core, with
// every result checked; the byte limit evicts and the results stay
// right.
func TestMPIMasterCache(t *testing.T) {
	ctx, w := onMPIRanks(t, "TestMPIMasterCache", []int{3}, 3*time.Minute, 2*time.Minute)
	if w == nil {
		return
	}
	require.NoError(t, cacheScenario(ctx, w))
	require.NoError(t, cacheLimitScenario(ctx, w))
}

// BenchmarkMPIMasterCachedRead is BenchmarkMasterCachedRead under
// mpirun -n 2 (one MPI initialization: no -test.count above 1):
//
//	go test -tags mpi -c -o /tmp/dist.test ./scheduler/dist
//	mpirun -n 2 /tmp/dist.test -test.run '^$' -test.bench 'MPIMasterCachedRead' -test.benchmem
//
// Outside mpirun it is skipped.
func BenchmarkMPIMasterCachedRead(b *testing.B) {
	benchUnderMPI(b, "BenchmarkMPIMasterCachedRead", benchCachedRanks)
}
