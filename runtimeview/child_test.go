package runtimeview_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/mpi"
	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/internal/launch"
	"github.com/pzgo/pz/internal/lockedbuf"
	"github.com/pzgo/pz/logger"
	"github.com/pzgo/pz/runtimeview"
)

// childEnv selects what the test binary does when a test re-executes it
// as a subprocess (see TestMain); childFile is where the child's callbacks
// write.
const (
	childEnv  = "PZ_RUNTIMEVIEW_TEST_CHILD"
	childFile = "PZ_RUNTIMEVIEW_TEST_FILE"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	// os/signal starts one goroutine for the process at the first Notify
	// and never stops it; start it before any test counts goroutines, so
	// that a test whose RuntimeView is the first to handle signals
	// (TestNewProcessWorld run alone) does not see it as a leak.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR2)
	signal.Stop(sig)
	os.Exit(m.Run())
}

// child is a tiny program built on runtimeview: it stacks two callbacks
// that append to a file, says "ready", and then either closes ("close"),
// or waits to be stopped by a signal ("wait"). In mode "refuse" it expects
// New to fail, as under mpirun without MPI support, and exits with status
// 2.
func child(mode string) int {
	if mode == "run" {
		return childRun()
	}
	ctx := context.Background()
	rt, err := runtimeview.New(ctx,
		runtimeview.WithHardwareOptions(hardware.WithoutGPUs()),
		runtimeview.WithLogOptions(logger.WithEnv(nil), logger.WithOff()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		if mode == "refuse" {
			return 2
		}
		return 3
	}
	if mode == "refuse" {
		fmt.Fprintln(os.Stderr, "child: New did not refuse")
		_ = rt.Close()
		return 0
	}
	file := os.Getenv(childFile)
	appendLine := func(s string) func() error {
		return func() error {
			f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(f, s)
			return errors.Join(err, f.Close())
		}
	}
	for _, s := range []string{"library A finalized", "library B finalized"} {
		if err := rt.StackCallback(appendLine(s)); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 3
		}
	}
	fmt.Println("ready")
	switch mode {
	case "close":
		if err := rt.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 3
		}
		return 0
	case "wait":
		time.Sleep(time.Minute)
		fmt.Fprintln(os.Stderr, "child: no signal came")
		return 4
	}
	fmt.Fprintln(os.Stderr, "child: unknown mode", mode)
	return 5
}

// childRun is a program whose main is runtimeview.Run (the ranks from
// PZ_RANKS, or the MPI launcher's): each rank stacks two callbacks that
// append "rank R: library X finalized" to the file, says "ready R PID",
// and runs AllReduces until its context ends, which only a signal does.
func childRun() int {
	file := os.Getenv(childFile)
	var mu sync.Mutex
	err := runtimeview.Run(context.Background(), 0, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		for _, lib := range []string{"A", "B"} {
			line := fmt.Sprintf("rank %d: library %s finalized", rt.Rank(), lib)
			if err := rt.StackCallback(func() error {
				mu.Lock()
				defer mu.Unlock()
				f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(f, line)
				return errors.Join(err, f.Close())
			}); err != nil {
				return err
			}
		}
		if err := rt.Barrier(ctx); err != nil {
			return err
		}
		fmt.Printf("ready %d %d\n", rt.Rank(), os.Getpid())
		for {
			if _, err := runtimeview.AllReduce(ctx, rt, []int64{1}, comm.Sum); err != nil {
				if ctx.Err() != nil {
					return context.Cause(ctx)
				}
				return err
			}
		}
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()),
		runtimeview.WithLogOptions(logger.WithEnv(nil), logger.WithOff()))
	fmt.Fprintln(os.Stderr, "child: Run returned without a signal's exit:", err)
	return 6
}

// startRunChild starts cmd (the test binary in mode "run", or mpirun of
// it) and returns once ranks ranks have said ready, with their pids by
// rank, and a function that waits for the command and returns its exit
// status and stderr.
func startRunChild(t *testing.T, cmd *exec.Cmd, ranks int) (pids []int, wait func() (int, string)) {
	t.Helper()
	stderr := new(lockedbuf.Buffer)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	pids = make([]int, ranks)
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		seen := 0
		for seen < ranks && sc.Scan() {
			var r, pid int
			if _, err := fmt.Sscanf(sc.Text(), "ready %d %d", &r, &pid); err != nil || r < 0 || r >= ranks {
				continue // mpirun's own lines
			}
			pids[r] = pid
			seen++
		}
		if seen < ranks {
			ready <- fmt.Errorf("%d of %d ranks said ready", seen, ranks)
		} else {
			ready <- nil
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case err := <-ready:
		require.NoError(t, err, "stderr: %s", stderr.String())
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the ranks were not ready after 60s; stderr: %s", stderr.String())
	}
	return pids, func() (int, string) {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(90 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("the job did not end 90s after the signal; stderr: %s", stderr.String())
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), stderr.String()
		}
		require.NoError(t, err)
		return 0, stderr.String()
	}
}

// A program whose main is Run, on in-process ranks, handles SIGINT and
// SIGTERM by default: every rank's context ends, each returns, its
// callbacks run once, last pushed first, and the process exits 128+signo.
func TestRunHandlesSignalsInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts subprocesses")
	}
	for _, tc := range []struct {
		sig    syscall.Signal
		status int
	}{{syscall.SIGTERM, 143}, {syscall.SIGINT, 130}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "finalized.txt")
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"=run", childFile+"="+file, runtimeview.EnvRanks+"=2")
			pids, wait := startRunChild(t, cmd, 2)
			require.NoError(t, syscall.Kill(pids[0], tc.sig))
			status, stderr := wait()
			assert.Equal(t, tc.status, status, stderr)
			b, err := os.ReadFile(file)
			require.NoError(t, err)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			assert.ElementsMatch(t, []string{"rank 0: library A finalized", "rank 0: library B finalized", "rank 1: library A finalized", "rank 1: library B finalized"}, lines)
			for r := range 2 {
				var order []string
				for _, l := range lines {
					if strings.HasPrefix(l, fmt.Sprintf("rank %d:", r)) {
						order = append(order, l)
					}
				}
				assert.Equal(t, []string{fmt.Sprintf("rank %d: library B finalized", r), fmt.Sprintf("rank %d: library A finalized", r)}, order, "rank %d: last pushed first", r)
			}
		})
	}
}

// runChild starts the test binary as a child in mode, waits for it to say
// ready, sends sig (if not nil) and returns its exit status and the file its
// callbacks wrote.
func runChild(t *testing.T, mode string, sig os.Signal) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	file := filepath.Join(t.TempDir(), "finalized.txt")
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, childFile+"="+file)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("child said %q", line)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		require.NoError(t, err, "stderr: %s", stderr.String())
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-ready
		t.Fatalf("child not ready after 30s; stderr: %s", stderr.String())
	}
	if sig != nil {
		require.NoError(t, cmd.Process.Signal(sig))
	}
	err = cmd.Wait()
	status := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		status = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return status, ""
	}
	require.NoError(t, err)
	t.Logf("child %s: status %d, stderr: %s", mode, status, stderr.String())
	return status, string(b)
}

func TestSignalRunsStackAndExits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts subprocesses")
	}
	const want = "library B finalized\nlibrary A finalized\n"
	for _, tc := range []struct {
		sig    syscall.Signal
		status int
	}{{syscall.SIGTERM, 143}, {syscall.SIGINT, 130}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			status, file := runChild(t, "wait", tc.sig)
			assert.Equal(t, tc.status, status)
			assert.Equal(t, want, file, "the stack ran once, last pushed first")
			assert.Equal(t, tc.status, runtimeview.ExitStatus(tc.sig))
		})
	}
	t.Run("normal close", func(t *testing.T) {
		status, file := runChild(t, "close", nil)
		assert.Equal(t, 0, status)
		assert.Equal(t, want, file)
	})
}

func TestRefusesMultiRankMPILaunchWithoutMPI(t *testing.T) {
	if mpi.Available() {
		t.Skip("built with -tags mpi")
	}
	if testing.Short() {
		t.Skip("starts mpirun")
	}
	lau, _ := launch.For(launch.OpenMPI)
	mpirun, err := lau.Run()
	if err != nil {
		t.Skip("mpirun not found; TestNewRefusesMultiRankLaunchWithoutMPI covers the check with a fake environment")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := lau.Args(2)
	args = append(args, os.Args[0], "-test.run=^$")
	cmd := exec.CommandContext(ctx, mpirun, args...)
	cmd.Env = append(os.Environ(), childEnv+"=refuse")
	out, err := cmd.CombinedOutput()
	require.NoError(t, ctx.Err(), "%s", out)
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "mpirun must fail: %s", out)
	assert.NotZero(t, ee.ExitCode())
	assert.NotContains(t, string(out), "did not refuse")
	// At least one rank explained itself before mpirun stopped the job.
	assert.Contains(t, string(out), "built without MPI support")
	assert.Contains(t, string(out), "go build -tags mpi")
	t.Logf("mpirun -n 2 of a binary without MPI:\n%s", out)
}
