package launch

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestDetect(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want Info
	}{
		{"none", nil, Info{"", -1, -1, -1, -1}},
		{"openmpi", map[string]string{"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0", "PMIX_RANK": "2"}, Info{"openmpi", 4, 2, 2, 0}},
		{"hydra", map[string]string{"PMI_SIZE": "8", "PMI_RANK": "7", "MPI_LOCALNRANKS": "4", "MPI_LOCALRANKID": "3"}, Info{"pmi", 8, 7, 4, 3}},
		{"mvapich2", map[string]string{"MV2_COMM_WORLD_SIZE": "3", "MV2_COMM_WORLD_RANK": "1"}, Info{"mvapich2", 3, 1, -1, -1}},
		{"pmix rank only", map[string]string{"PMIX_RANK": "0"}, Info{"pmix", -1, 0, -1, -1}},
		{"garbage ignored", map[string]string{"OMPI_COMM_WORLD_SIZE": "four", "PMI_SIZE": "-2"}, Info{"", -1, -1, -1, -1}},
		{"fill from another", map[string]string{"OMPI_COMM_WORLD_SIZE": "2", "PMIX_RANK": "1"}, Info{"openmpi", 2, 1, -1, -1}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, Detect(envOf(c.env)), "case %d", i)
		})
	}
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name     string
		env      map[string]string
		mpiBuilt bool
		fail     bool
	}{
		{"no launcher", nil, false, false},
		{"one rank", map[string]string{"OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_RANK": "0"}, false, false},
		{"four ranks", map[string]string{"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "0"}, false, true},
		{"four ranks with mpi", map[string]string{"OMPI_COMM_WORLD_SIZE": "4"}, true, false},
		{"pmi", map[string]string{"PMI_SIZE": "2", "PMI_RANK": "1"}, false, true},
		{"pmix rank 3, size unknown", map[string]string{"PMIX_RANK": "3"}, false, true},
		{"pmix rank 0, size unknown", map[string]string{"PMIX_RANK": "0"}, false, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Check(envOf(c.env), c.mpiBuilt)
			if !c.fail {
				assert.NoError(t, err, "case %d", i)
				return
			}
			require.ErrorIs(t, err, ErrNotBuiltWithMPI, "case %d", i)
			assert.Contains(t, err.Error(), "go build -tags mpi", "case %d", i)
		})
	}
}

// helperEnv marks a run of this test binary as the program under test.
const helperEnv = "PZ_LAUNCH_HELPER"

// helperExit is the status of the helper when Check fails.
const helperExit = 3

// TestHelperProcess is the tiny program the subprocess tests run: it calls
// Check as a binary without MPI support would, and exits helperExit on error.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper process for TestSubprocess*; does nothing on its own")
	}
	if err := Check(os.Getenv, false); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(helperExit)
	}
	fmt.Println("running as rank 0 of 1")
	os.Exit(0)
}

func helper(ctx context.Context, t *testing.T, name string, args []string, env ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok, "running %s: %v\n%s", name, err, out)
		code = ee.ExitCode()
	}
	require.NoError(t, ctx.Err(), "%s timed out:\n%s", name, out)
	return string(out), code
}

func TestSubprocessEnv(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := []string{"-test.run=^TestHelperProcess$"}
	out, code := helper(ctx, t, os.Args[0], args, "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=0")
	assert.Equal(t, helperExit, code, out)
	assert.Contains(t, out, "go build -tags mpi")

	out, code = helper(ctx, t, os.Args[0], args, "OMPI_COMM_WORLD_SIZE=", "PMI_SIZE=", "PMIX_RANK=", "OMPI_COMM_WORLD_RANK=")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "running as rank 0 of 1")
}

func TestSubprocessMpirun(t *testing.T) {
	lau, _ := For(OpenMPI)
	mpirun, err := lau.Run()
	if err != nil {
		t.Skip("mpirun not installed; install Open MPI (Debian: openmpi-bin) to run this test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := lau.Args(2)
	args = append(args, os.Args[0], "-test.run=^TestHelperProcess$")
	out, code := helper(ctx, t, mpirun, args)
	assert.NotEqual(t, 0, code, out)
	// Both ranks refuse; none runs as rank 0 of 1.
	assert.Equal(t, 2, strings.Count(out, "go build -tags mpi"), out)
	assert.NotContains(t, out, "running as rank 0 of 1")
}

func TestLauncher(t *testing.T) {
	om, err := For(OpenMPI)
	require.NoError(t, err)
	args := om.Args(3)
	assert.Equal(t, []string{"-n", "3", "--oversubscribe"}, args[:3])
	assert.Equal(t, os.Geteuid() == 0, slices.Contains(args, "--allow-run-as-root"))
	mc, err := For(MPICH)
	require.NoError(t, err)
	assert.Equal(t, []string{"-n", "3"}, mc.Args(3), "Hydra oversubscribes and runs as root as it is")
	_, err = For("lam")
	assert.ErrorContains(t, err, `unknown MPI library "lam"`)

	// A library without its tools in PATH: ErrNoLauncher naming them.
	t.Setenv("PATH", t.TempDir())
	_, err = om.Run()
	assert.ErrorIs(t, err, ErrNoLauncher)
	assert.ErrorContains(t, err, "mpirun.openmpi")
	_, err = mc.Command(context.Background(), 2, "true")
	assert.ErrorIs(t, err, ErrNoLauncher)
	assert.ErrorContains(t, err, "mpiexec.mpich")
}

// When its context ends, a job started by Command is sent SIGTERM, not
// killed: Open MPI's mpirun, killed, leaves its session directory
// ($TMPDIR/ompi.*) and the ranks' shared-memory segments behind (a
// Ctrl-C of pzrun bench comm did).
func TestCommandStopsTheLauncherWithSIGTERM(t *testing.T) {
	dir := t.TempDir()
	// A launcher that says when it is ready and how it was stopped.
	script := "#!/bin/sh\ntrap 'echo TERM; exit 143' TERM\necho ready\nwhile :; do sleep 0.01; done\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mpiexec.mpich"), []byte(script), 0o755))
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	lau, err := For(MPICH)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cmd, err := lau.Command(ctx, 2, "prog")
	require.NoError(t, err)
	assert.Equal(t, StopGrace, cmd.WaitDelay)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(out)
	require.True(t, sc.Scan())
	require.Equal(t, "ready", sc.Text())
	cancel()
	var said []string
	for sc.Scan() {
		said = append(said, sc.Text())
	}
	err = cmd.Wait()
	assert.Equal(t, []string{"TERM"}, said, "the launcher was not sent SIGTERM (%v)", err)
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 143, ee.ExitCode())
}
