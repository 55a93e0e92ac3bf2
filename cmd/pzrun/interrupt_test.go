package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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

// interruptMPIJob starts cmd, which runs an MPI job, with Open MPI's
// scratch folders of its own (mpiScratch), sends it SIGINT once the
// job's ranks run, and checks that it exits 130 leaving nothing in those
// folders; it returns what cmd printed.
func interruptMPIJob(t *testing.T, cmd *exec.Cmd) (stdout, stderr string) {
	t.Helper()
	tmp, shm := mpiScratch(t, cmd)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	var werr error
	go func() { werr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	waitForEntry(t, shm, exited) // the job's ranks run
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	<-exited
	var ee *exec.ExitError
	require.ErrorAs(t, werr, &ee, errb.String())
	assert.Equal(t, 130, ee.ExitCode(), errb.String())
	assertEmpty(t, tmp, "the session directory")
	assertEmpty(t, shm, "shared-memory segments")
	return out.String(), errb.String()
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
	stdout, stderr := interruptMPIJob(t, cmd)
	assert.Contains(t, stdout, `{"op":"allreduce","bytes":8,"ranks":2,"backend":"local"`, "pz's figures are printed")
	assert.Contains(t, stderr, "the C peer was stopped: pzrun: interrupt received")
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
	// A light schedule (10 ms periods, little busy-waiting, no spin, a
	// generous liveness bound): what is checked is the stop, and under
	// go test -race beside other packages on 2 cores the default 1 ms
	// schedule fell 10 s behind, and the master aborted the run blaming
	// a client before the stop came (CI failure).
	cmd := exec.Command(bin, "stm", "bench", "-frames", "1000000", "-period", "10ms", "-load", "0.05", "-spin", "0s",
		"-liveness", "10m", "-o", runPath)
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

// Under an MPI launcher every process has the same arguments: each finds
// a usage error itself, before any rank starts, rank 0 alone says it and
// every process exits 2 (they printed it once per rank, and those found
// by the ranks ended the job with MPI_Abort, status 1).
func TestUsageErrorUnderLauncherSaidByRankZero(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"cholesky", "-nosuchflag"}, "pzrun cholesky: flag provided but not defined: -nosuchflag\n"},
		{[]string{"-n", "0", "hello"}, "pzrun: -n must be at least 1, got 0\n"},
		{[]string{"-n", "2", "hello"}, "pzrun hello: -n 2 given under an MPI launcher (openmpi); let mpirun choose the ranks: mpirun -n 2 pzrun hello\n"},
		{[]string{"cholesky", "-n", "1000", "-b", "256"}, "pzrun cholesky: invalid options: matrix size 1000 is not a multiple of block size 256 (try -n 1024)\n"},
		{[]string{"cholesky", "-policy", "nosuch"}, "pzrun cholesky: unknown policy \"nosuch\"; valid: "},
		{[]string{"cholesky", "-grid", "2x2"}, "pzrun cholesky: invalid options: dist: distribution does not fit the ranks: a 2 x 2 process grid for 2 ranks"},
		{[]string{"gemm", "-grid", "1x1", "-n", "512"}, "pzrun gemm: invalid options: dist: distribution does not fit the ranks: a 1 x 1 process grid for 2 ranks"},
		{[]string{"gemm", "-device-only"}, "pzrun gemm: -device-only is cholesky's"},
		{[]string{"cholesky", "-device-only", "-sim", "1"}, "pzrun cholesky: -device-only serves one-rank runs so far\n"},
		{[]string{"bench", "comm", "-sizes", "7"}, "pzrun bench comm: -sizes: \"7\" is not a positive multiple of 8\n"},
		{[]string{"bench", "tasks", "-tasks", "1"}, "pzrun bench tasks: -tasks 1 and -rounds 7: want at least 2 tasks and 1 round\n"},
		{[]string{"contexts", "-workers", "1"}, "pzrun contexts: invalid options: -workers 1; two contexts need at least 2 workers\n"},
		{[]string{"contexts", "-hypervisor", "nosuch"}, "pzrun contexts: invalid options: "},
	} {
		for rank := range 2 {
			env := map[string]string{"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": fmt.Sprint(rank)}
			var out, errb bytes.Buffer
			code := run(testCtx(t), c.args, &out, &errb, func(k string) string { return env[k] })
			assert.Equal(t, exitUsage, code, "%v on rank %d: %s", c.args, rank, errb.String())
			assert.Empty(t, out.String(), "%v", c.args)
			if rank == 0 {
				assert.True(t, strings.HasPrefix(errb.String(), c.want), "%v: %q", c.args, errb.String())
			} else {
				assert.Empty(t, errb.String(), "%v on rank 1", c.args)
			}
		}
	}
}

// A contexts run whose scheduler gets one worker (under mpirun -n 2 on
// two cores, each rank's share) says which flag asks for more.
func TestContextsOneWorkerNamesTheFlag(t *testing.T) {
	env := map[string]string{"PZ_NCPU": "1"}
	t.Setenv("PZ_NCPU", "1")
	var out, errb bytes.Buffer
	code := run(testCtx(t), []string{"contexts", "-small", "128", "-large", "256", "-b", "64", "-hypervisor", "idle"}, &out, &errb, func(k string) string { return env[k] })
	assert.Equal(t, exitUsage, code, errb.String())
	assert.Contains(t, errb.String(), "the scheduler has 1 worker")
	assert.Contains(t, errb.String(), "-workers 2")
}

// A rank of an MPI job that a stop signal does not end within its grace
// ends the job (MPI_Abort, status 1), saying so; one that returns in
// time, or whose context ends otherwise, is left alone.
func TestAbortAfterStop(t *testing.T) {
	type call struct{ abort, exit int }
	// watch cancels a watched context with cause, then waits for the
	// watch's exit when wait is "exit", for the goroutine's end when it
	// is "done", for nothing ("") before the app returns.
	watch := func(cause error, grace time.Duration, wait string) ([]call, string) {
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		var (
			mu    sync.Mutex
			calls []call
			errb  syncWriter
			buf   strings.Builder
		)
		exited := make(chan struct{})
		errb.w = &buf
		stop, done := abortAfterStop(ctx, "pzrun bench comm", 1, 2, grace, &errb,
			func(code int) error {
				mu.Lock()
				defer mu.Unlock()
				calls = append(calls, call{abort: code})
				return errors.New("mpi: Abort: not really")
			},
			func(code int) {
				mu.Lock()
				calls = append(calls, call{exit: code})
				mu.Unlock()
				close(exited)
			})
		cancel(cause)
		switch wait {
		case "exit":
			<-exited
		case "done":
			<-done
		}
		stop()
		mu.Lock()
		defer mu.Unlock()
		return calls, buf.String()
	}
	calls, out := watch(&stopSignal{sig: syscall.SIGTERM}, 20*time.Millisecond, "exit")
	assert.Equal(t, []call{{abort: 1}, {exit: 1}}, calls)
	assert.Equal(t, "pzrun (rank 1 of 2): pzrun bench comm still running 20ms after SIGTERM: ending the job (MPI_Abort)\npzrun (rank 1): mpi: Abort: not really\n", out)

	calls, out = watch(&stopSignal{sig: syscall.SIGTERM}, time.Hour, "") // returned in time
	assert.Empty(t, calls)
	assert.Empty(t, out)

	// Not a stop signal: the watch ends at once, even with no grace.
	calls, out = watch(errors.New("not a signal"), 0, "done")
	assert.Empty(t, calls)
	assert.Empty(t, out)
}

// A program pzrun cannot launch under an MPI launcher is a usage error
// on every rank, said once: -n by rank 0 (every process has the same
// arguments), a path the file system refuses by each node's first rank,
// naming its rank (a node of a cluster may lack the file). Every rank
// said it, without its rank.
func TestProgramUsageErrorUnderLauncherSaidOnce(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	require.NoError(t, os.WriteFile(prog, []byte("#!/bin/sh\nexit 0\n"), 0o755))
	nosuch := filepath.Join(dir, "nosuch")
	for _, c := range []struct {
		args  []string
		local bool     // the launcher gives each rank's local rank
		want  []string // what ranks 0 and 1 say
	}{
		{[]string{"-n", "2", prog}, false, []string{"pzrun: -n 2 given under an MPI launcher (openmpi); let mpirun choose the ranks: mpirun -n 2 pzrun " + prog + "\n", ""}},
		{[]string{nosuch}, false, []string{"pzrun (rank 0): stat " + nosuch + ": no such file or directory (a program to launch is a path", ""}},
		{[]string{dir}, false, []string{"pzrun (rank 0): " + dir + " is a directory, not a program", ""}},
		// Ranks 0 and 1 on two nodes: each node's first rank says it.
		{[]string{nosuch}, true, []string{"pzrun (rank 0): stat " + nosuch, "pzrun (rank 1): stat " + nosuch}},
	} {
		for rank := range 2 {
			env := map[string]string{"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": fmt.Sprint(rank)}
			if c.local {
				env["OMPI_COMM_WORLD_LOCAL_RANK"], env["OMPI_COMM_WORLD_LOCAL_SIZE"] = "0", "1"
			}
			var out, errb bytes.Buffer
			code := run(testCtx(t), c.args, &out, &errb, func(k string) string { return env[k] })
			assert.Equal(t, exitUsage, code, "%v on rank %d: %s", c.args, rank, errb.String())
			assert.Empty(t, out.String(), "%v", c.args)
			if c.want[rank] == "" {
				assert.Empty(t, errb.String(), "%v on rank %d", c.args, rank)
			} else {
				assert.True(t, strings.HasPrefix(errb.String(), c.want[rank]), "%v on rank %d: %q", c.args, rank, errb.String())
				assert.Equal(t, 1, strings.Count(errb.String(), "\n"), "%v on rank %d: one line: %q", c.args, rank, errb.String())
			}
		}
	}
}

// A pz program built without -tags mpi, launched under an MPI launcher
// with several ranks, is a usage error found before it starts, from its
// build settings, said once a node with the rebuild and the in-process
// alternative. Every rank started it, and each refused to run, ending
// "or run without mpirun to use in-process ranks".
func TestProgramWithoutMPITagUnderLauncher(t *testing.T) {
	prog := filepath.Join(t.TempDir(), "allreduce")
	out, err := exec.Command("go", "build", "-o", prog, "../../examples/allreduce").CombinedOutput()
	require.NoError(t, err, string(out))
	want := "pzrun (rank 0): " + prog + " was built without -tags mpi: under the openmpi launcher each of its processes would refuse to run as one rank of 2; " +
		"rebuild it with MPI (needs the MPI development files, e.g. Debian's libopenmpi-dev): go build -tags mpi -o " + prog + " github.com/pzgo/pz/examples/allreduce (in its module), " +
		"then mpirun -n 2 pzrun " + prog + "; or run it on in-process ranks, without mpirun: pzrun -n 2 " + prog + "\n"
	for rank := range 2 {
		env := map[string]string{"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": fmt.Sprint(rank)}
		var outb, errb bytes.Buffer
		code := run(testCtx(t), []string{prog}, &outb, &errb, func(k string) string { return env[k] })
		assert.Equal(t, exitUsage, code, "rank %d: %s", rank, errb.String())
		assert.Empty(t, outb.String(), "rank %d: not started", rank)
		if rank == 0 {
			assert.Equal(t, want, errb.String())
		} else {
			assert.Empty(t, errb.String(), "rank %d", rank)
		}
	}
}
