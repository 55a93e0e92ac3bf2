package static

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loggedProc is a process started by a test whose output lines (stdout
// and stderr together) are kept and passed on.
type loggedProc struct {
	cmd   *exec.Cmd
	out   lockedLines
	lines chan string   // every line, for a test that waits for one
	done  chan struct{} // closed once its output ended and it was waited for
	err   error         // cmd.Wait's, once done is closed
}

type lockedLines struct {
	w lockedWriter
	b strings.Builder
}

func (l *lockedLines) String() string {
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	return l.b.String()
}

// startLogged starts cmd (its stdout and stderr on one pipe); the test
// kills it at its end if it is still running.
func startLogged(t *testing.T, cmd *exec.Cmd) *loggedProc {
	t.Helper()
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = pw, pw
	p := &loggedProc{cmd: cmd, lines: make(chan string, 1024), done: make(chan struct{})}
	p.out.w.w = &p.out.b
	require.NoError(t, cmd.Start())
	pw.Close()
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			fmt.Fprintln(&p.out.w, sc.Text())
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		pr.Close()
		p.err = cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
	})
	return p
}

// waitLine waits for a line of p's output that contains s.
func (p *loggedProc) waitLine(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l := <-p.lines:
			if strings.Contains(l, s) {
				return
			}
		case <-p.done:
			t.Fatalf("%s ended before saying %q: %s", p.cmd.Args[0], s, p.out.String())
		case <-deadline:
			t.Fatalf("timed out waiting for %q: %s", s, p.out.String())
		}
	}
}

// waitExit waits at most within for p to exit and returns its status.
func (p *loggedProc) waitExit(t *testing.T, what string, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("%s still running %v later: %s", what, within, p.out.String())
	}
	return exitCode(t, p.err)
}

// A client process whose setup does not finish (here: until its stdin
// ends) aborts the run of a master process once the setup bound
// (WithSetupTimeout, far below its 10 s default) has passed since the
// start, with an error naming that client and its pid; the other client,
// set up and waiting for the first period, leaves on its own with no
// frame run, and the late one leaves too once its setup ends: no process
// is left behind.
func TestProcessClientNeverReady(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const setupBound = 2 * time.Second
	plan := compileString(t, readyPlan)
	planPath := writePlanFile(t, plan)
	dir := privateTestDir(t)
	exe, err := os.Executable()
	require.NoError(t, err)

	master := exec.Command(exe, "-test.run", "^$")
	master.Env = append(os.Environ(), "PZ_STM_TEST_MASTER="+planPath, "PZ_STM_DIR="+dir,
		"PZ_STM_TEST_LIVENESS=1s", "PZ_STM_TEST_SETUP_TIMEOUT="+setupBound.String())
	m := startLogged(t, master)

	a := exec.Command(exe, "-test.run", "^$")
	a.Env = append(os.Environ(), "PZ_STM_TEST_CLIENT=a", "PZ_STM_TEST_PLAN="+planPath, "PZ_STM_DIR="+dir, "PZ_STM_TEST_SAY=1")
	ca := startLogged(t, a)

	b := exec.Command(exe, "-test.run", "^$")
	b.Env = append(os.Environ(), "PZ_STM_TEST_CLIENT=b", "PZ_STM_TEST_PLAN="+planPath, "PZ_STM_DIR="+dir, "PZ_STM_TEST_SETUP_BLOCK=1")
	setupEnd, err := b.StdinPipe()
	require.NoError(t, err)
	cb := startLogged(t, b)
	t.Cleanup(func() { setupEnd.Close() })

	// b has the start and is in its setup: the bound counts from the
	// start, sent before this.
	cb.waitLine(t, "b: setup blocked")
	blocked := time.Now()
	code := m.waitExit(t, "the master", setupBound+6*time.Second) // well below the default bound, 10s
	took := time.Since(blocked)
	assert.Equal(t, 1, code, m.out.String())
	assert.Contains(t, m.out.String(), fmt.Sprintf("client b (pid %d) was not ready %v after the start (the setup bound, WithSetupTimeout)", b.Process.Pid, setupBound))
	assert.NotContains(t, m.out.String(), "client a (pid ", "client a was ready")
	assert.NotContains(t, m.out.String(), "every client is set up")
	t.Logf("the master ended %v after b's setup blocked", took)

	// a, ready and waiting for t0, leaves on its own, with no frame run.
	assert.NotEqual(t, 0, ca.waitExit(t, "client a", 30*time.Second), ca.out.String())
	assert.NotContains(t, ca.out.String(), "frame 1")
	assert.Contains(t, ca.out.String(), fmt.Sprintf("client a: static: run aborted: client a: client b (pid %d) was not ready", b.Process.Pid))

	// b, its setup over after the abort, leaves too: it does not wait
	// for a t0 that will never come.
	require.NoError(t, setupEnd.Close())
	assert.NotEqual(t, 0, cb.waitExit(t, "client b", 30*time.Second), cb.out.String())
	assert.Contains(t, cb.out.String(), fmt.Sprintf("client b: static: run aborted: client b (pid %d) was not ready", b.Process.Pid))
	t.Logf("a: %s\nb: %s", ca.out.String(), cb.out.String())
}
