package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/logger"
	"github.com/pzgo/pz/runtimeview"
)

// progEnv makes the test binary the pz program testProgram (TestMain),
// in the mode it names, for pzrun to launch; progDir is where its
// finalizers write.
const (
	progEnv = "PZRUN_TEST_PROGRAM"
	progDir = "PZRUN_TEST_DIR"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(progEnv); mode != "" {
		os.Exit(testProgram(mode))
	}
	os.Exit(m.Run())
}

// testProgram is a pz program (its main is runtimeview.Run, the ranks
// from PZ_RANKS): each rank stacks a finalizer that writes DIR/fin.RANK,
// and rank 0 prints "ready PID PGID" once every rank runs. In mode "loop"
// the ranks run AllReduces until their context ends; in mode "hang" they
// ignore its end (rank 0 prints "canceled") and block; in mode "exit"
// they return at once; in mode "new" it is a program whose main calls
// runtimeview.New instead of Run (testProgramNew).
func testProgram(mode string) int {
	dir := os.Getenv(progDir)
	if mode == "new" {
		return testProgramNew()
	}
	err := runtimeview.Run(context.Background(), 0, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		r := rt.Rank()
		if err := rt.StackCallback(func() error {
			return os.WriteFile(filepath.Join(dir, fmt.Sprintf("fin.%d", r)), nil, 0o644)
		}); err != nil {
			return err
		}
		if err := rt.Barrier(ctx); err != nil {
			return err
		}
		if r == 0 {
			fmt.Printf("ready %d %d\n", os.Getpid(), syscall.Getpgrp())
		}
		if mode == "exit" {
			return nil
		}
		if mode == "hang" {
			<-ctx.Done()
			if r == 0 {
				fmt.Println("canceled")
			}
			select {}
		}
		tick := time.NewTicker(time.Millisecond) // a collective a millisecond, as a solver's loop
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
			if _, err := runtimeview.AllReduce(ctx, rt, []int64{1}, comm.Sum); err != nil {
				return err
			}
		}
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), runtimeview.WithLogOptions(logger.WithOff()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "program:", err)
		return 1
	}
	return 0
}

// programCmd is the real pzrun binary bin launching testProgram in mode
// on ranks in-process ranks, its finalizers writing to dir.
func programCmd(t *testing.T, bin, mode, dir string, ranks int) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(bin, "-n", fmt.Sprint(ranks), self)
	cmd.Env = append(os.Environ(), progEnv+"="+mode, progDir+"="+dir)
	return cmd
}

// readLines sends r's lines (without a trailing \r: a terminal's) on the
// returned channel, closed at EOF or a read error.
func readLines(r io.Reader) <-chan string {
	ch := make(chan string, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- strings.TrimSuffix(sc.Text(), "\r")
		}
	}()
	return ch
}

// waitLine returns the first line from ch that starts with prefix.
func waitLine(t *testing.T, ch <-chan string, prefix string) string {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-ch:
			require.True(t, ok, "output ended before a line %q", prefix)
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("no line %q within 60 s", prefix)
		}
	}
}

// readyLine parses testProgram's "ready PID PGID".
func readyLine(t *testing.T, l string) (pid, pgid int) {
	t.Helper()
	_, err := fmt.Sscanf(l, "ready %d %d", &pid, &pgid)
	require.NoError(t, err, l)
	return pid, pgid
}

// waitExit waits for cmd (started) and returns its exit status.
func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			return 0
		}
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		ws := ee.Sys().(syscall.WaitStatus)
		require.False(t, ws.Signaled(), "pzrun was killed by %v", ws.Signal())
		return ee.ExitCode()
	case <-time.After(90 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatal("pzrun did not end")
		return -1
	}
}

// finalized counts the ranks whose finalizer ran.
func finalized(t *testing.T, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "fin.*"))
	require.NoError(t, err)
	return len(m)
}

// gone says whether no process of group pgid is left.
func gone(pgid int) bool { return syscall.Kill(-pgid, 0) == syscall.ESRCH }

// A signal to pzrun's process group - a terminal's Ctrl-C without a
// terminal, `timeout`, kill -- -PGID - stops the launched program once,
// gracefully: every rank's finalizer runs and the status is 128 plus the
// signal's number. When the program shared pzrun's group it got the
// signal and the SIGTERM pzrun passed on, and the second one killed it
// mid-shutdown about one time in four.
func TestProgramStopsOnceOnGroupSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildPzrun(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		for i := range 6 {
			dir := t.TempDir()
			cmd := programCmd(t, bin, "loop", dir, 3)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // as setsid: pzrun's group alone
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			var errb bytes.Buffer
			cmd.Stderr = &errb
			require.NoError(t, cmd.Start())
			_, pgid := readyLine(t, waitLine(t, readLines(out), "ready"))
			assert.NotEqual(t, cmd.Process.Pid, pgid, "the program runs in a group of its own")
			require.NoError(t, syscall.Kill(-cmd.Process.Pid, sig))
			code := waitExit(t, cmd)
			assert.Equal(t, 128+int(sig), code, "%v, run %d: %s", sig, i, errb.String())
			assert.Equal(t, 3, finalized(t, dir), "%v, run %d: every rank's finalizer ran: %s", sig, i, errb.String())
			assert.NotContains(t, errb.String(), "pzrun:", "%v, run %d: an expected stop says nothing", sig, i)
			assert.True(t, gone(pgid), "%v, run %d", sig, i)
		}
	}
}

// A second signal to pzrun, past repeatWindow, kills the program that
// ignores the first (its whole process group) and pzrun exits 128 plus
// the signal's number, saying so; it used to exit at once and leave the
// program running, reparented to init.
func TestSecondSignalKillsProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildPzrun(t)
	dir := t.TempDir()
	cmd := programCmd(t, bin, "hang", dir, 2)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	require.NoError(t, cmd.Start())
	ch := readLines(out)
	pid, pgid := readyLine(t, waitLine(t, ch, "ready"))
	first := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	waitLine(t, ch, "canceled") // the program got the stop and ignores it
	// Not the first signal delivered twice (relaySignals).
	time.Sleep(time.Until(first.Add(2 * repeatWindow)))
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 143, waitExit(t, cmd), errb.String())
	assert.Contains(t, errb.String(), fmt.Sprintf("pzrun: SIGTERM again: killing %s (process group %d)", cmd.Args[3], pgid))
	assert.NotContains(t, errb.String(), "ranks")
	assert.True(t, gone(pgid), "the program's group is gone")
	assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "no orphan")
	assert.Zero(t, finalized(t, dir), "killed, not finalized")
}

// waitFor waits until cond holds: a state that no event announces to the
// test (another process's terminal settings).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A program that does not end within its grace period after the stop
// pzrun passed on is killed, process group and all, and pzrun says so.
func TestProgramGraceKills(t *testing.T) {
	var errb bytes.Buffer
	p := programRun{name: "pzrun", stderr: &errb, grace: 50 * time.Millisecond}
	code, prog, pid := stopDeafProgram(t, "trap '' INT TERM", p, syscall.SIGTERM, nil)
	assert.Equal(t, 143, code)
	assert.Contains(t, errb.String(), fmt.Sprintf("pzrun: %s still running 50ms after SIGTERM: killing it (process group %d)", prog, pid))
	// The shell's sleep, killed too, is reaped by init.
	waitFor(t, "the program's group gone", func() bool { return gone(pid) })
}

// A second stop signal (again) kills the program's group at once, with
// the same status and a message that names the program.
func TestProgramAgainKills(t *testing.T) {
	var errb bytes.Buffer
	again := make(chan os.Signal, 1)
	p := programRun{name: "pzrun", stderr: &errb, grace: time.Hour, again: again}
	code, prog, pid := stopDeafProgram(t, "trap 'echo got it' INT", p, syscall.SIGINT, again)
	assert.Equal(t, 130, code)
	assert.Contains(t, errb.String(), fmt.Sprintf("pzrun: SIGINT again: killing %s (process group %d)", prog, pid))
	// The shell's sleep, killed too, is reaped by init.
	waitFor(t, "the program's group gone", func() bool { return gone(pid) })
}

// stopDeafProgram runs, under p, a shell script that sets trap (to
// ignore or outlast a stop), says ready and loops; once it is ready it
// stops p with sig (the cause of p's context) and, when again is not nil,
// sends sig there too. It returns the status p.run returned, the script
// and the program's process id (its group's).
func stopDeafProgram(t *testing.T, trap string, p programRun, sig syscall.Signal, again chan<- os.Signal) (code int, prog string, pid int) {
	t.Helper()
	prog = filepath.Join(t.TempDir(), "deaf.sh")
	require.NoError(t, os.WriteFile(prog, []byte("#!/bin/sh\n"+trap+"\necho ready $$\nwhile :; do sleep 0.01; done\n"), 0o755))
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ready := make(chan struct{})
	p.path = prog
	cmd := exec.Command(prog)
	cmd.Stdout = &readyWriter{ready: ready}
	codec := make(chan int, 1)
	go func() { codec <- p.run(ctx, cmd) }()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("the program never started")
	}
	cancel(&stopSignal{sig: sig})
	if again != nil {
		again <- sig
	}
	select {
	case code = <-codec:
	case <-time.After(30 * time.Second):
		t.Fatal("pzrun did not kill the program")
	}
	return code, prog, cmd.Process.Pid
}

// relaySignals cancels on the first signal with it as the cause, drops
// the same stop delivered twice within repeatWindow (coreutils timeout)
// and passes on one later signal only.
func TestRelaySignals(t *testing.T) {
	var elapsed atomic.Int64 // since time zero, set by the test, read by the relay
	clock := func() time.Time { return time.Unix(1000, elapsed.Load()) }
	sigs := make(chan os.Signal)
	again := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		relaySignals(sigs, cancel, again, clock)
	}()
	sigs <- syscall.SIGTERM
	sigs <- syscall.SIGTERM // microseconds later: timeout's second
	<-ctx.Done()
	assert.Equal(t, syscall.SIGTERM, signalOf(ctx))
	assert.ErrorIs(t, context.Cause(ctx), context.Canceled, "a stop is a cancellation")
	sigs <- syscall.SIGINT // the sends are unbuffered: it has been read
	assert.Empty(t, again, "within the window: the same stop")
	elapsed.Store(int64(repeatWindow))
	sigs <- syscall.SIGINT
	sigs <- syscall.SIGTERM
	close(sigs)
	<-done
	require.Len(t, again, 1)
	assert.Equal(t, syscall.SIGINT, <-again)
	assert.Nil(t, signalOf(context.Background()))
}

// A launched program's ending that pzrun did not ask for is named: a
// signal, a nonzero status; a success and the stop pzrun passed on are
// not.
func TestProgramEndingsNamed(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
		return p
	}
	cases := []struct {
		prog string
		code int
		want string
	}{
		{script("segv.sh", "kill -SEGV $$"), 139, "was killed by SIGSEGV (segmentation fault)"},
		{script("five.sh", "exit 5"), 5, "exited with status 5"},
		{script("ok.sh", "exit 0"), 0, ""},
		{script("int.sh", "exit 130"), 130, ""}, // a Ctrl-C in its terminal
	}
	for i, c := range cases {
		code, _, errs := pzrun(t, "-n", "3", c.prog)
		assert.Equal(t, c.code, code, "case %d", i)
		if c.want == "" {
			assert.Empty(t, errs, "case %d", i)
			continue
		}
		assert.Equal(t, fmt.Sprintf("pzrun: %s %s\n", c.prog, c.want), errs, "case %d", i)
	}
}

// A program that cannot read PZ_RANKS - not a Go program, or a Go
// program that does not use pz - runs once however many ranks -n asks
// for: pzrun says so (it ran it silently, as if it had N ranks), runs it
// all the same and exits with its status. A pz program (the test binary)
// and a script, which may start one, are not noted; nor is -n 1.
func TestNonPzProgramNoted(t *testing.T) {
	goTool, err := exec.LookPath("go") // a Go program without pz
	if err != nil {
		t.Skip("no go tool in PATH")
	}
	code, out, errs := pzrun(t, "-n", "3", goTool, "version")
	assert.Equal(t, 0, code, errs)
	assert.Contains(t, out, "go version")
	assert.Equal(t, fmt.Sprintf("pzrun: note: %s is a Go program that does not use pz (no github.com/pzgo/pz among its modules): it runs once, as one process, and -n 3 (PZ_RANKS=3) gives it no ranks\n", goTool), errs)

	if sh, err := exec.LookPath("sh"); err == nil && !isScript(t, sh) { // an ELF, not a Go program
		code, _, errs = pzrun(t, "-n", "2", sh, "-c", "exit 4")
		assert.Equal(t, 4, code, errs)
		assert.Equal(t, fmt.Sprintf("pzrun: note: %s is not a Go program: it runs once, as one process, and -n 2 (PZ_RANKS=2) gives it no ranks (a pz program's main calls runtimeview.Run; an MPI program of another kind runs under mpirun -n 2)\npzrun: %[1]s exited with status 4\n", sh), errs)
	}

	code, _, errs = pzrun(t, "-n", "1", goTool, "version")
	assert.Equal(t, 0, code)
	assert.Empty(t, errs, "-n 1: one rank is what it gets")

	// The test binary is a pz program: no note.
	self, err := os.Executable()
	require.NoError(t, err)
	t.Setenv(progEnv, "exit")
	t.Setenv(progDir, t.TempDir())
	code, _, errs = pzrun(t, "-n", "2", self)
	assert.Equal(t, 0, code, errs)
	assert.NotContains(t, errs, "note:", "the test binary is a pz program")
}

// isScript says whether the file at path starts with #!.
func isScript(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 2)
	_, _ = io.ReadFull(f, b)
	return string(b) == "#!"
}

// testProgramNew is a pz program whose main calls runtimeview.New: it
// prints "rank R of N" and closes.
func testProgramNew() int {
	rt, err := runtimeview.New(context.Background(), runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), runtimeview.WithLogOptions(logger.WithOff()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "program:", err)
		return 1
	}
	fmt.Printf("rank %d of %d\n", rt.Rank(), rt.Size())
	if err := rt.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "program:", err)
		return 1
	}
	return 0
}

// A pz program whose main calls runtimeview.New (the docs' other way to
// get a view) runs one rank however many -n asks for: New never reads
// PZ_RANKS. It ran silently as one rank under pzrun -n 3; it now says so
// on stderr, naming runtimeview.Run, and runs all the same. -n 1 and no
// -n get no note.
func TestProgramUsingNewNoted(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	t.Setenv(progEnv, "new")
	t.Setenv(runtimeview.EnvRanks, "")
	code, out, errs := pzrun(t, "-n", "3", self)
	assert.Equal(t, 0, code, errs)
	assert.Equal(t, "rank 0 of 1\n", out)
	assert.Equal(t, "pz: note: PZ_RANKS=3 asks for 3 in-process ranks, but runtimeview.New gives this process one rank (New takes the MPI world under mpirun, else one rank): call runtimeview.Run(ctx, 0, fn), which reads PZ_RANKS, to run 3 in-process ranks\n", errs)
	for _, args := range [][]string{{"-n", "1", self}, {self}} {
		code, out, errs = pzrun(t, args...)
		assert.Equal(t, 0, code, errs)
		assert.Equal(t, "rank 0 of 1\n", out, "%v", args)
		assert.Empty(t, errs, "%v", args)
	}
}

// A program given more in-process ranks than the machine's memory holds
// is refused as a built-in app is, a usage error (status 2), before it
// starts. It was started, and its own check (runtimeview.RunLocal) failed
// it: pzrun said "exited with status 1".
func TestProgramRanksBeyondMemoryRefused(t *testing.T) {
	dir := t.TempDir()
	prog, started := filepath.Join(dir, "prog"), filepath.Join(dir, "started")
	require.NoError(t, os.WriteFile(prog, []byte("#!/bin/sh\ntouch "+started+"\n"), 0o755))
	var out, errb bytes.Buffer
	code := run(testCtx(t), []string{"-n", "99999999999", prog}, &out, &errb, func(string) string { return "" })
	assert.Equal(t, exitUsage, code, errb.String())
	assert.Contains(t, errb.String(), "pzrun: -n 99999999999: runtimeview: invalid launch: 99999999999 in-process ranks need about 1525878.9 GiB")
	assert.NotContains(t, errb.String(), "exited with status")
	assert.NoFileExists(t, started, "the program was started")
	// What fits still starts.
	errb.Reset()
	require.Equal(t, exitOK, run(testCtx(t), []string{"-n", "2", prog}, &out, &errb, func(string) string { return "" }), errb.String())
	assert.FileExists(t, started)
}
