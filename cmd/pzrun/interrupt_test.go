package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pzgo/pz/internal/launch"
	"github.com/pzgo/pz/internal/peerdir"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mpiScratch points Open MPI's session directory (TMPDIR/ompi.*) and its
// shared-memory segments (btl vader's, /dev/shm by default) at folders of
// the test's own, for cmd, and returns them: what an interrupted job
// leaves behind is seen there, apart from other jobs on the machine.
func mpiScratch(t *testing.T, cmd *exec.Cmd) (tmp, shm string) {
	tmp, shm = t.TempDir(), t.TempDir()
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "OMPI_MCA_btl_vader_backing_directory="+shm)
	return tmp, shm
}

// waitForEntry returns once dir has an entry: an MPI job's ranks are up
// when their shared-memory segments are there.
func waitForEntry(t *testing.T, dir string, exited <-chan struct{}) {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		if es, _ := os.ReadDir(dir); len(es) > 0 {
			return
		}
		select {
		case <-exited:
			t.Fatalf("the command ended before anything appeared in %s", dir)
		case <-deadline:
			t.Fatalf("nothing appeared in %s", dir)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// assertEmpty fails when dir has entries left.
func assertEmpty(t *testing.T, dir, what string) {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	assert.Empty(t, names, "%s left behind in %s", what, dir)
}

// A Ctrl-C of pzrun bench comm while the C peer's mpirun runs stops that
// job with SIGTERM, so that mpirun cleans up after it (killed, it left
// $TMPDIR/ompi.* and /dev/shm/vader_segment.*), prints what pz measured,
// and exits 130.
func TestBenchCommSIGINTDuringPeerCleansUp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pzrun and runs mpirun")
	}
	lau, _ := launch.For(launch.OpenMPI)
	if _, err := lau.Cc(); err != nil {
		t.Skip(err)
	}
	peer := peerdir.Find("mpi")
	if peer == "" {
		t.Skip("../shared/peers/mpi not found beside the checkout")
	}
	bin := buildPzrun(t)
	cmd := exec.Command(bin, "-n", "2", "bench", "comm", "-ops", "allreduce", "-sizes", "8", "-scale", "0.1", "-peer", peer)
	tmp, shm := mpiScratch(t, cmd)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	var werr error
	go func() { werr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	waitForEntry(t, shm, exited) // the peer's ranks run
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	<-exited
	var ee *exec.ExitError
	require.ErrorAs(t, werr, &ee, stderr.String())
	assert.Equal(t, 130, ee.ExitCode(), stderr.String())
	assert.Contains(t, stdout.String(), `{"op":"allreduce","bytes":8,"ranks":2,"backend":"local"`, "pz's figures are printed")
	assert.Contains(t, stderr.String(), "the C peer was stopped: pzrun: interrupt received")
	assertEmpty(t, tmp, "the session directory")
	assertEmpty(t, shm, "shared-memory segments")
}

// A Ctrl-C at the terminal (SIGINT to pzrun's process group) of pzrun stm
// bench stops the run at a period boundary and prints what it measured,
// with cyclictest's figures; it blames no client (they were killed, and
// named as failed) and leaves no /dev/shm/cyclictest<pid>; pzrun exits
// 130.
func TestSTMBenchSIGINTToTheGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pzrun")
	}
	bin := buildPzrun(t)
	before, _ := filepath.Glob("/dev/shm/cyclictest*")
	runPath := filepath.Join(t.TempDir(), "run.json")
	cmd := exec.Command(bin, "stm", "bench", "-frames", "1000000", "-o", runPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // as a shell's job
	var stdout strings.Builder
	cmd.Stdout = &stdout
	var errb lines
	running, eof := startLogged(t, cmd, "master: period", &errb)
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	select {
	case <-running:
	case <-eof:
		t.Fatalf("pzrun ended before the run: %s", errb.String())
	}
	require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGINT))
	<-eof
	var ee *exec.ExitError
	require.ErrorAs(t, cmd.Wait(), &ee, errb.String())
	assert.Equal(t, 130, ee.ExitCode(), errb.String())
	assert.NotRegexp(t, `client c\d: |disconnected`, errb.String(), "no client is blamed")
	assert.Contains(t, stdout.String(), "start jitter p50 ")
	if _, err := exec.LookPath("cyclictest"); err == nil {
		assert.Contains(t, stdout.String(), "cyclictest wake-up latency p99 ", errb.String())
		after, _ := filepath.Glob("/dev/shm/cyclictest*")
		for _, f := range after {
			assert.Contains(t, before, f, "cyclictest's file left behind")
		}
	}
	b, err := os.ReadFile(runPath)
	require.NoError(t, err)
	assert.Contains(t, string(b), "the master was stopped (pzrun: interrupt received)")
}
