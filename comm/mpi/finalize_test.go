//go:build mpi

package mpi_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm/mpi"
	"github.com/pzgo/pz/internal/launch"
)

// unjoinedEnv selects the job of TestFinalizeWithUnjoinedCollective.
const unjoinedEnv = "PZ_MPI_TEST_UNJOINED"

// TestFinalizeWithUnjoinedCollective: rank 0 starts an Ibarrier that rank
// 1 never starts, then finalizes. Its Finalize waits for the engine's
// goroutine, inside MPI_Barrier, for the bound (shortened here to 200 ms)
// and then returns an error wrapping mpi.ErrUnfinalized that names the
// Ibarrier, without calling MPI_Finalize. (Before, it called MPI_Finalize
// with the goroutine inside MPI_Barrier, which is undefined: under Open
// MPI 4.1.4 rank 0 hung in MPI_Finalize until rank 1 exited and mpirun
// ended the job.) Rank 0 then exits from TestMain without MPI_Finalize
// (status 1: its world is finalized for pz, so the exit status cannot be
// agreed on), and mpirun reports it and ends the job, rank 1 included,
// which waits in MPI_Finalize. The parent checks what rank 0 said, and
// that the job ended.
func TestFinalizeWithUnjoinedCollective(t *testing.T) {
	if underLauncher() {
		if os.Getenv(unjoinedEnv) == "" {
			t.Skip("run by TestFinalizeWithUnjoinedCollective under its own mpirun")
		}
		require.Equal(t, 2, world.Size(), "runs on 2 ranks")
		if world.Rank() == 1 {
			// Rank 1 is elsewhere: it never starts the Ibarrier, and
			// finalizes (MPI_Finalize may wait there for rank 0).
			err := world.Finalize()
			fmt.Fprintf(os.Stderr, "rank 1: Finalize: %v\n", err)
			return
		}
		mpi.SetFinalizeWait(world, 200*time.Millisecond)
		req, err := world.Ibarrier()
		require.NoError(t, err)
		// Finalize must find the collective inside MPI, not queued
		// (Close fails a queued one without running it).
		require.Eventually(t, func() bool { return len(mpi.EnginesRunning(world)) > 0 }, time.Minute, time.Millisecond)
		start := time.Now()
		err = world.Finalize()
		fmt.Fprintf(os.Stderr, "rank 0: Finalize returned after %v: %v\n", time.Since(start), err)
		require.ErrorIs(t, err, mpi.ErrUnfinalized)
		require.ErrorContains(t, err, "Ibarrier #1 on rank 0 is still running: another rank has not taken part in it within 200ms")
		require.ErrorIs(t, world.Finalize(), mpi.ErrUnfinalized, "a second Finalize returns the first one's error")
		assert.True(t, mpi.Initialized(), "MPI left initialized")
		done, _, _ := req.Test()
		assert.False(t, done, "the Ibarrier completed without rank 1")
		assert.Equal(t, []string{"Ibarrier #1 on rank 0"}, mpi.EnginesRunning(world))
		return
	}
	lau, _ := launch.For(mpi.Library())
	mpirun, err := lau.Run()
	if err != nil {
		t.Skip("mpirun not found: install Open MPI (Debian: openmpi-bin)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append(lau.Args(2), os.Args[0], "-test.run=^TestFinalizeWithUnjoinedCollective$", "-test.count=1", "-test.v")
	cmd := exec.CommandContext(ctx, mpirun, args...)
	cmd.Env = append(os.Environ(), unjoinedEnv+"=1")
	out, err := cmd.CombinedOutput()
	s := string(out)
	require.NoError(t, ctx.Err(), "the job did not end:\n%s", s)
	// A rank exited without MPI_Finalize: mpirun says so and fails.
	require.Error(t, err, "%s", s)
	require.Contains(t, s, "rank 0: Finalize returned after ", s)
	require.Contains(t, s, "mpi: MPI left unfinalized: Finalize found non-blocking collectives still inside MPI: comm: Ibarrier #1 on rank 0 is still running", s)
	require.Contains(t, s, "--- PASS: TestFinalizeWithUnjoinedCollective", s)
	require.NotContains(t, s, "--- FAIL", s)
	require.False(t, strings.Contains(s, "SIGSEGV") || strings.Contains(s, "Segmentation fault"), "a rank crashed:\n%s", s)
}
