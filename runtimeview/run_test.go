package runtimeview_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm/mpi"
	"github.com/pzgo/pz/runtimeview"
)

func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestRunChoosesRanks(t *testing.T) {
	ctx := testCtx(t)
	cases := []struct {
		name string
		n    int
		env  map[string]string
		want int
	}{
		{"default one rank", 0, nil, 1},
		{"explicit n", 3, nil, 3},
		{"PZ_RANKS", 0, map[string]string{"PZ_RANKS": "4"}, 4},
		{"n beats PZ_RANKS", 2, map[string]string{"PZ_RANKS": "4"}, 2},
		{"launcher with one rank", 0, map[string]string{"OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_RANK": "0"}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int32
			var sizes atomic.Int64
			err := runtimeview.Run(ctx, c.n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				calls.Add(1)
				sizes.Store(int64(rt.Size()))
				return nil
			}, runtimeview.WithGetenv(envOf(c.env)), withMachine(t))
			if errors.Is(err, mpi.ErrFinalized) && calls.Load() == 0 {
				// -tags mpi: the launcher case starts MPI in this
				// process, and MPI starts once per process; an earlier
				// run (-count=2) or test finalized it.
				t.Skipf("MPI was finalized earlier in this process and cannot start again: %v", err)
			}
			require.NoError(t, err)
			assert.EqualValues(t, c.want, calls.Load())
			assert.EqualValues(t, c.want, sizes.Load())
		})
	}
}

func TestRunRejectsBadCounts(t *testing.T) {
	ctx := testCtx(t)
	never := func(context.Context, *runtimeview.RuntimeView) error {
		t.Error("fn must not run")
		return nil
	}
	for name, c := range map[string]struct {
		n   int
		env map[string]string
	}{
		"negative":              {-1, nil},
		"PZ_RANKS garbage":      {0, map[string]string{"PZ_RANKS": "many"}},
		"PZ_RANKS zero":         {0, map[string]string{"PZ_RANKS": "0"}},
		"n under mpirun":        {2, map[string]string{"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0"}},
		"PZ_RANKS under mpirun": {0, map[string]string{"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0", "PZ_RANKS": "4"}},
	} {
		t.Run(name, func(t *testing.T) {
			err := runtimeview.Run(ctx, c.n, never, runtimeview.WithGetenv(envOf(c.env)), withMachine(t))
			assert.ErrorIs(t, err, runtimeview.ErrLaunch)
			if name == "n under mpirun" {
				// The user did run mpirun -n 2: the fix is to pass 0.
				assert.Contains(t, err.Error(), "pass 0 as the rank count")
				assert.NotContains(t, err.Error(), "mpirun -n")
			}
			if name == "negative" {
				assert.Contains(t, err.Error(), "rank count -1 is negative (pass 0 to take PZ_RANKS")
			}
			if name == "PZ_RANKS under mpirun" {
				assert.Contains(t, err.Error(), "PZ_RANKS=4 asks for in-process ranks, but the")
			}
		})
	}
}

// TestRunNilFunction: Run with a nil function is an ErrOption that names
// Run, on both paths, before anything starts. It said "RunLocal with a
// nil function" to a caller of Run, and under a launcher it went on to
// New (MPI_Init, the hardware exchange), then failed every rank with a
// nil-pointer panic in fn and ended the job with MPI_Abort (helper-130's
// trial).
func TestRunNilFunction(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"in-process":    nil,
		"under mpirun":  {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0"},
		"under 1 rank":  {"OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_RANK": "0"},
		"PZ_RANKS of 3": {"PZ_RANKS": "3"},
	} {
		t.Run(name, func(t *testing.T) {
			err := runtimeview.Run(testCtx(t), 0, nil, runtimeview.WithGetenv(envOf(env)), withMachine(t), quietLogs)
			require.ErrorIs(t, err, runtimeview.ErrOption)
			assert.Contains(t, err.Error(), "Run with a nil function")
		})
	}
}

// TestRunLocalRejectsBadCounts: RunLocal with no ranks, or a negative
// count, says so (ErrLaunch), as Run does.
func TestRunLocalRejectsBadCounts(t *testing.T) {
	for _, n := range []int{0, -1} {
		err := runtimeview.RunLocal(testCtx(t), n, func(context.Context, *runtimeview.RuntimeView) error {
			t.Error("fn must not run")
			return nil
		}, withMachine(t))
		require.ErrorIs(t, err, runtimeview.ErrLaunch, "n=%d", n)
		assert.Contains(t, err.Error(), fmt.Sprintf("runtimeview: invalid launch: RunLocal needs at least 1 rank, got %d", n))
	}
}
