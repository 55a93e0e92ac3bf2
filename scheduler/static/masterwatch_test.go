package static

import (
	"bufio"
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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exitMasterLost is a test client process's exit status when
// EnterScheduler returned ErrMasterLost (and ErrAborted).
const exitMasterLost = 4

// masterProcess runs the plan at path as a master process: the test
// binary with PZ_STM_TEST_MASTER set, on the socket directory
// PZ_STM_DIR, for PZ_STM_TEST_FRAMES periods (0: until stopped) with the
// liveness bound PZ_STM_TEST_LIVENESS (and the setup bound
// PZ_STM_TEST_SETUP_TIMEOUT, when set). It prints its log on stdout.
func masterProcess(path string) int {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	plan, err := ReadPlan(f)
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	var frames int64
	fmt.Sscan(os.Getenv("PZ_STM_TEST_FRAMES"), &frames)
	liveness, _ := time.ParseDuration(os.Getenv("PZ_STM_TEST_LIVENESS"))
	opts := []Option{WithDir(os.Getenv("PZ_STM_DIR")), WithFrames(frames), WithLiveness(liveness),
		WithLog(func(s string) { fmt.Println(s) })}
	if d, err := time.ParseDuration(os.Getenv("PZ_STM_TEST_SETUP_TIMEOUT")); err == nil {
		opts = append(opts, WithSetupTimeout(d))
	}
	m, err := NewMaster(plan, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	if _, err := m.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "master:", err)
		return 1
	}
	return 0
}

// twoClients is a plan of two clients, one waiting for the other, at 5 ms.
const twoClients = `
hyperepochs:
  - name: main
    period: 5ms
    resources: [cpu0, cpu1]
    epochs: [{name: frame}]
clients: [a, b]
runnables:
  - {name: a1, client: a, resource: cpu0, wcet: 400us}
  - {name: b1, client: b, resource: cpu1, wcet: 400us, deps: [a1]}
`

// startMasterProcess starts a master process on dir; its said closes
// when it logs that a client joined, and its lines get its log lines. The liveness bound
// is generous (the master must not abort a client slowed by the race
// detector on a loaded machine): the tests set the clients' master
// timeout apart.
func startMasterProcess(t *testing.T, dir, planPath string, frames int64) *procClient {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run", "^$")
	cmd.Env = append(os.Environ(), "PZ_STM_TEST_MASTER="+planPath, "PZ_STM_DIR="+dir,
		fmt.Sprintf("PZ_STM_TEST_FRAMES=%d", frames), "PZ_STM_TEST_LIVENESS=10s")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p := &procClient{name: "master", cmd: cmd, stderr: &strings.Builder{}, said: make(chan struct{}), done: make(chan error, 1), lines: make(chan string, 1024)}
	cmd.Stderr = &lockedWriter{w: p.stderr}
	require.NoError(t, cmd.Start())
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(out)
		var once sync.Once
		for sc.Scan() {
			t.Log(sc.Text())
			select {
			case p.lines <- sc.Text():
			default: // a test that does not read them
			}
			if strings.Contains(sc.Text(), " joined (pid ") {
				once.Do(func() { close(p.said) }) // a client is in
			}
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		<-scanned // no t.Log once the test has ended
	})
	return p
}

// startTimedClient starts a client process whose master timeout is
// timeout.
func startTimedClient(t *testing.T, dir, planPath, name string, say int64, timeout time.Duration) *procClient {
	t.Helper()
	t.Setenv("PZ_STM_TEST_MASTER_TIMEOUT", timeout.String())
	return startClient(t, dir, planPath, name, say)
}

// exitCode returns a process's exit status from cmd.Wait's error.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	return ee.ExitCode()
}

// A master stopped with SIGSTOP mid-run (a run with no frame limit)
// left its clients running their loops forever: nothing told them that
// no master watched the run any more, nor would any stop come. Each
// client now leaves within its master timeout of the master's last
// beat, naming the master, its board and the time since the beat.
func TestProcessStoppedMaster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	plan := compileString(t, twoClients)
	planPath := writePlanFile(t, plan)
	dir := privateTestDir(t)
	const timeout = time.Second
	m := startMasterProcess(t, dir, planPath, 0)
	a := startTimedClient(t, dir, planPath, "a", 0, timeout)
	b := startTimedClient(t, dir, planPath, "b", 20, timeout)
	waitFor(t, b.said, "client b's 20th frame")
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := time.Now()
	board := filepath.Join(dir, boardName)
	for _, p := range []*procClient{a, b} {
		err := waitFor(t, p.done, "client "+p.name)
		took := time.Since(stopped)
		assert.Equal(t, exitMasterLost, exitCode(t, err), "client %s: %s", p.name, p)
		out := p.String()
		t.Logf("client %s said: %s", p.name, out)
		assert.Contains(t, out, fmt.Sprintf("client %s: static: run aborted: client %s: the master (pid %d, board %s) has not beaten for ", p.name, p.name, m.cmd.Process.Pid, board), "client %s", p.name)
		assert.Contains(t, out, "(this client's master timeout is 1s): its process is stopped (state T", "client %s", p.name)
		assert.Contains(t, out, fmt.Sprintf("end it (kill -KILL %d), then start the master and the clients again", m.cmd.Process.Pid), "client %s", p.name)
		// Not before the timeout (the last beat may have come one beat
		// before the SIGSTOP), and within it plus room for a loaded
		// machine.
		assert.GreaterOrEqual(t, took, timeout-beatEvery(10*time.Second), "client %s", p.name)
		assert.Less(t, took, timeout+5*time.Second, "client %s", p.name)
	}
	// Resumed, the master finds both clients gone and may exit before
	// the kill: either ends it.
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGCONT))
	m.cmd.Process.Kill()
	waitFor(t, m.done, "the master")
}

// A master that is slow but alive (stopped again and again, each time
// for less than the clients' master timeout but for many of its beats)
// is not taken for lost: the run ends at its frame limit, every process
// with status 0.
func TestProcessSlowMasterNotLost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	plan := compileString(t, twoClients)
	planPath := writePlanFile(t, plan)
	dir := privateTestDir(t)
	// Pauses of 10 beats, a quarter of the timeout: the margin absorbs
	// a loaded machine's scheduling delays (CI runs on 2 cores).
	const timeout, pause = 2 * time.Second, 500 * time.Millisecond
	m := startMasterProcess(t, dir, planPath, 600) // 3 s
	a := startTimedClient(t, dir, planPath, "a", 0, timeout)
	b := startTimedClient(t, dir, planPath, "b", 10, timeout)
	waitFor(t, b.said, "client b's 10th frame")
	pauses := 0
	for done := false; !done; {
		require.NoError(t, m.cmd.Process.Signal(syscall.SIGSTOP))
		time.Sleep(pause) // the master's pause, not a wait for an event
		require.NoError(t, m.cmd.Process.Signal(syscall.SIGCONT))
		pauses++
		select {
		case err := <-m.done:
			m.done <- err
			done = true
		case <-time.After(100 * time.Millisecond): // the master runs a little between pauses
		}
	}
	assert.GreaterOrEqual(t, pauses, 2, "the master was stopped more than once")
	assert.NoError(t, waitFor(t, m.done, "the master"), "master: %s", m)
	for _, p := range []*procClient{a, b} {
		assert.NoError(t, waitFor(t, p.done, "client "+p.name), "client %s: %s", p.name, p)
	}
}

// A master killed with SIGKILL mid-run: each client said only "the
// master closed the connection". It now names the master and its
// board, says that the process exited and how it may have been killed,
// and what to do.
func TestProcessKilledMaster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	plan := compileString(t, twoClients)
	planPath := writePlanFile(t, plan)
	dir := privateTestDir(t)
	m := startMasterProcess(t, dir, planPath, 0)
	a := startClient(t, dir, planPath, "a", 0)
	b := startClient(t, dir, planPath, "b", 20)
	waitFor(t, b.said, "client b's 20th frame")
	require.NoError(t, m.cmd.Process.Kill())
	board := filepath.Join(dir, boardName)
	for _, p := range []*procClient{a, b} {
		err := waitFor(t, p.done, "client "+p.name)
		assert.Equal(t, exitMasterLost, exitCode(t, err), "client %s: %s", p.name, p)
		t.Logf("client %s said: %s", p.name, p)
		assert.Contains(t, p.String(), fmt.Sprintf("client %s: static: run aborted: client %s: the master (pid %d, board %s) exited mid-run without a word: it was killed (SIGKILL, or the kernel's OOM killer: see dmesg) or it crashed (see its output). The run cannot go on without its master: start the master again, then the clients", p.name, p.name, m.cmd.Process.Pid, board), "client %s", p.name)
	}
	waitFor(t, m.done, "the master")
}

// The watch's arithmetic: the default timeout is the master's liveness
// bound (two of a long period), a short one is raised to four beats,
// and the master is lost only once its beat is older than the timeout.
func TestMasterWatch(t *testing.T) {
	b := newBoard(1, 1)
	clk := newClock()
	for _, c := range []struct {
		opt      time.Duration
		liveness time.Duration
		want     time.Duration
	}{
		{0, 6 * time.Second, 6 * time.Second}, // a 3 s period
		{0, 0, time.Second},
		{time.Millisecond, time.Second, 200 * time.Millisecond},
		{3 * time.Second, time.Second, 3 * time.Second},
	} {
		cl, err := NewClient("a", WithMasterTimeout(c.opt))
		require.NoError(t, err)
		w := cl.newMasterWatch(&message{Liveness: int64(c.liveness), MasterPID: os.Getpid(), Board: "/x/board"}, b, clk)
		assert.Equal(t, c.want, w.timeout, "%+v", c)
		b.beat(clk.now() - int64(c.want) + int64(c.want/10))
		assert.Empty(t, w.check(), "%+v", c)
		b.beat(clk.now() - int64(c.want) - int64(c.want/10))
		why := w.check()
		assert.Contains(t, why, fmt.Sprintf("the master (pid %d, board /x/board) has not beaten for ", os.Getpid()), "%+v", c)
		assert.Regexp(t, `its process is there \(state [A-Za-z]\) but its loop does not go round`, why, "%+v", c)
	}
	_, err := NewClient("a", WithMasterTimeout(-time.Second))
	require.ErrorContains(t, err, "WithMasterTimeout(-1s): want a duration >= 0")
	e := error(&lostError{msg: "x"})
	assert.True(t, errors.Is(e, ErrAborted) && errors.Is(e, ErrMasterLost))
}
