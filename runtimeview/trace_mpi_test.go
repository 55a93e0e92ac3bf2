//go:build mpi

package runtimeview_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm/mpi"
	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/internal/launch"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler/dist"
)

// TestMPISchedulerTrace: with PZ_TRACE on the ranks of an MPI job, rank
// 0 writes one trace of every rank's tasks at Close, and no rank writes
// its own. Under mpirun it is one rank of the job (its processes, of one
// host, share a directory named after their parent, mpirun's daemon);
// otherwise it starts a job of 3 ranks, and skips without mpirun.
func TestMPISchedulerTrace(t *testing.T) {
	if !launch.Detect(os.Getenv).Launched() {
		lau, _ := launch.For(mpi.Library())
		mpirun, err := lau.Run()
		if err != nil {
			t.Skip("mpirun not found: install Open MPI (Debian: openmpi-bin) to test the MPI backend")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		args := append(lau.Args(3), os.Args[0], "-test.run=^TestMPISchedulerTrace$", "-test.count=1", "-test.v")
		cmd := exec.CommandContext(ctx, mpirun, args...)
		cmd.Env = append(os.Environ(), "OMPI_MCA_btl_vader_single_copy_mechanism=none")
		out, err := cmd.CombinedOutput()
		require.NoError(t, ctx.Err(), "mpirun timed out:\n%s", out)
		require.NoError(t, err, "mpirun %s:\n%s", strings.Join(args, " "), out)
		assert.Equal(t, 3, strings.Count(string(out), "--- PASS: TestMPISchedulerTrace"), "%s", out)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("pz-trace-mpi-%d", os.Getppid()))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, "x.json")
	rt, err := runtimeview.New(ctx, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), quietLogs,
		runtimeview.WithGetenv(func(k string) string {
			if k == "PZ_TRACE" {
				return path
			}
			return os.Getenv(k)
		}))
	require.NoError(t, err)
	n := rt.Size()
	rank := rt.Rank()
	const tasks = 30
	require.NoError(t, traceGraph(ctx, rt, tasks, func(int) error { return nil }))
	require.NoError(t, rt.Close())
	if rank != 0 {
		return
	}
	defer os.RemoveAll(dir)
	want := map[int]int{}
	for r := range n {
		want[r] = tasks / n
		assert.NoFileExists(t, dist.RankTracePath(path, r))
	}
	assert.Equal(t, want, traceTasks(t, path, "work"), "every rank's tasks, by rank")
	assert.FileExists(t, filepath.Join(dir, "x.svg"))
}
