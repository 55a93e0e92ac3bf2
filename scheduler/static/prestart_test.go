package static

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A master that hangs (SIGSTOP, a deadlock) after a client joined and
// before the start, while it waits for the others: no board exists yet,
// and the client waited for ever. The master now beats to the clients
// that have joined while it waits, and a client leaves once the beats
// stop for its master timeout, naming the master and its state.
func TestProcessMasterStoppedWhileWaiting(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	planPath := writePlanFile(t, compileString(t, twoClients))
	dir := privateTestDir(t)
	const timeout = time.Second
	m := startMasterProcess(t, dir, planPath, 0)
	a := startTimedClient(t, dir, planPath, "a", 0, timeout)
	waitFor(t, m.said, "client a to join")
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := time.Now()
	err := waitFor(t, a.done, "client a")
	took := time.Since(stopped)
	assert.Equal(t, exitMasterLost, exitCode(t, err), "client a: %s", a)
	out := a.String()
	t.Logf("client a said: %s", out)
	pid := m.cmd.Process.Pid
	assert.Contains(t, out, fmt.Sprintf("client a: static: client a: the master (pid %d, socket %s) has not beaten for ", pid, filepath.Join(dir, sockName)))
	assert.Contains(t, out, "while this client waited for the start (this client's master timeout is 1s; a master waiting for other clients beats all the same): its process is stopped (state T")
	assert.Contains(t, out, fmt.Sprintf("end it (kill -KILL %d), then start the master and the clients again", pid))
	// Not before the timeout (less the beat before the SIGSTOP), and
	// within it plus room for a loaded machine.
	assert.GreaterOrEqual(t, took, timeout-waitBeatEvery(10*time.Second), "client a left too early")
	assert.Less(t, took, timeout+5*time.Second)
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGCONT))
	require.NoError(t, m.cmd.Process.Kill())
	waitFor(t, m.done, "the master")
}

// A master that is alive and waits for a client that has not started
// yet, for longer than the joined client's master timeout, is not lost:
// its beats measure its own liveness, not the others' arrival. The run
// starts when the last client comes and ends at its frame limit.
func TestProcessMasterWaitingNotLost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	planPath := writePlanFile(t, compileString(t, twoClients))
	dir := privateTestDir(t)
	const timeout = 500 * time.Millisecond
	m := startMasterProcess(t, dir, planPath, 20)
	a := startTimedClient(t, dir, planPath, "a", 0, timeout)
	waitFor(t, m.said, "client a to join")
	// The master logs that it still waits every 5 s: ten of a's
	// timeouts.
	for waiting := true; waiting; {
		select {
		case line := <-m.lines:
			waiting = !strings.HasSuffix(line, "master: still waiting for client b")
		case err := <-a.done:
			t.Fatalf("client a left while the master waited for b: %v: %s", err, a)
		case <-time.After(60 * time.Second):
			t.Fatal("the master never said that it still waits for b")
		}
	}
	b := startTimedClient(t, dir, planPath, "b", 0, timeout)
	assert.NoError(t, waitFor(t, m.done, "the master"), "master: %s", m)
	for _, p := range []*procClient{a, b} {
		assert.NoError(t, waitFor(t, p.done, "client "+p.name), "client %s: %s", p.name, p)
	}
}

// A master killed before the start: the client said only "the master
// closed the connection before the start: EOF". It now names the
// master (its pid from the socket's peer credentials), says that it
// exited, and what to do.
func TestProcessMasterKilledBeforeStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	planPath := writePlanFile(t, compileString(t, twoClients))
	dir := privateTestDir(t)
	m := startMasterProcess(t, dir, planPath, 0)
	a := startClient(t, dir, planPath, "a", 0)
	waitFor(t, m.said, "client a to join")
	require.NoError(t, m.cmd.Process.Kill())
	err := waitFor(t, a.done, "client a")
	assert.Equal(t, exitMasterLost, exitCode(t, err), "client a: %s", a)
	t.Logf("client a said: %s", a)
	assert.Contains(t, a.String(), fmt.Sprintf("client a: static: client a: the master (pid %d, socket %s) exited before the start without a word: it was killed (SIGKILL, or the kernel's OOM killer: see dmesg) or it crashed (see its output). Start the master again, and this client again", m.cmd.Process.Pid, filepath.Join(dir, sockName)))
	waitFor(t, m.done, "the master")
}

// A client built from an older pz (its hello carries no protocol
// version, or version 1, which knows no ready message and would read the
// board's t0 before the master writes it) is refused by the master with
// both versions and the fix: it would otherwise fail on the board
// (another size: "the master runs another plan"), on the master's beats,
// or wait for ever for a first period.
func TestOlderClientRefused(t *testing.T) {
	plan := compileString(t, twoClients)
	dir := privateTestDir(t)
	startMaster(t, plan, WithDir(dir))
	for _, tc := range []struct {
		proto int
		says  string
	}{
		{0, "no protocol version (board format pzstm3 or older)"},
		{1, "protocol version 1"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := dialMaster(ctx, dir, func(string) {})
		require.NoError(t, err)
		defer conn.Close()
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(30*time.Second)))
		l := newSockLink(conn)
		require.NoError(t, l.send(&message{Type: msgHello, Client: "a", Proto: tc.proto, PID: os.Getpid(), Runnables: []string{"a1"}}))
		m, err := l.recv()
		require.NoError(t, err, "the master answers an old client at once")
		assert.Equal(t, msgRefused, m.Type)
		assert.Equal(t, "the client was built from a pz older than the master's: its hello carries "+tc.says+", the master speaks protocol version 2 (board format pzstm3); rebuild the client and the master from the same pz", m.Reason)
	}
}

// A board of another pz's format (pzstm2, the layout before the
// master's beat) is named as such, not as another plan's board.
func TestOpenBoardOfAnotherFormat(t *testing.T) {
	dir := t.TempDir()
	const runnables, clients = 2, 2
	write := func(name string, magic uint64, words int) string {
		path := filepath.Join(dir, name)
		b := make([]byte, 8*words)
		binary.NativeEndian.PutUint64(b, magic)
		require.NoError(t, os.WriteFile(path, b, 0o600))
		return path
	}
	old := write("old", 0x707a73746d320a, boardWords(runnables, clients)-1) // pzstm2: one header word less
	_, err := openBoardFile(old, runnables, clients)
	require.Error(t, err)
	assert.Equal(t, fmt.Sprintf("static: board %s has format pzstm2, and this client reads pzstm3: the master and this client were built from different versions of pz; rebuild the client and the master from the same pz", old), err.Error())
	junk := write("junk", 42, boardWords(runnables, clients))
	_, err = openBoardFile(junk, runnables, clients)
	assert.ErrorContains(t, err, "is not a pz board (its first word is 0x2a; this client reads format pzstm3)")
	assert.Equal(t, "pzstm3", boardFormatName(boardMagic))
}

// The watch before the start: it begins with the first beat (the
// master's liveness bound is the default timeout), a master silent for
// longer than the timeout is lost, and time this client itself did not
// run is not counted against the master.
func TestStartWatch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	beat := &message{Type: msgBeat, Liveness: int64(2 * time.Second), MasterPID: 77}
	w := &startWatch{sock: "/x/master.sock"}
	assert.Empty(t, w.check(t0.Add(time.Hour)), "no beat yet: no watch (an older master)")
	require.True(t, w.beat(beat, t0))
	assert.Equal(t, 2*time.Second, w.timeout)
	assert.Equal(t, 50*time.Millisecond, w.every)
	// Checks every 25 ms: silent for 1.9 s, then 2.1 s.
	var why string
	for at := 25 * time.Millisecond; at <= 2100*time.Millisecond; at += 25 * time.Millisecond {
		why = w.check(t0.Add(at))
		if at <= 1900*time.Millisecond {
			require.Empty(t, why, "at %v", at)
		}
	}
	assert.Contains(t, why, "the master (pid 77, socket /x/master.sock) has not beaten for 2.1s while this client waited for the start (this client's master timeout is 2s")

	// The client stopped 10 s, then a check before the beats queued
	// meanwhile are read: the master has the timeout again.
	w = &startWatch{option: 300 * time.Millisecond, pid: 5, sock: "/x/master.sock"}
	w.beat(beat, t0)
	assert.Equal(t, 300*time.Millisecond, w.timeout, "the client's option")
	assert.Empty(t, w.check(t0.Add(10*time.Second)))
	why = ""
	for at := 10*time.Second + 25*time.Millisecond; why == ""; at += 25 * time.Millisecond {
		why = w.check(t0.Add(at))
		require.Less(t, at, 10*time.Second+400*time.Millisecond, "lost within its timeout after the client ran again")
		if why != "" {
			assert.Greater(t, at, 10*time.Second+250*time.Millisecond, "not before its timeout after the client ran again")
		}
	}

	// A short option is raised to four beats.
	w = &startWatch{option: time.Millisecond}
	w.beat(beat, t0)
	assert.Equal(t, 200*time.Millisecond, w.timeout)
	assert.Equal(t, "the master (in this process)", w.who())
}

// A client that has joined and waits for the others says which the
// master still waits for, after a second and every five after (found in
// helper-134's fault-injection trial: a client whose peers had been
// refused waited for ever with nothing on its output, only the master's
// log said why).
func TestProcessJoinedClientSaysWhatItWaitsFor(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	plan := compileString(t, threeClients)
	planPath := writePlanFile(t, plan)
	dir := privateTestDir(t)
	t.Setenv("PZ_STM_TEST_LOG", "1")
	res := startMaster(t, plan, WithDir(dir), WithFrames(10))
	a := startClient(t, dir, planPath, "a", 0)
	want := regexp.MustCompile(regexp.QuoteMeta(fmt.Sprintf("a: joined the master (pid %d, socket %s) ", os.Getpid(), filepath.Join(dir, sockName))) +
		`\d+s ago; waiting for the start: the master still waits for clients b, c \(start them\)`)
	deadline := time.Now().Add(60 * time.Second)
	for !want.MatchString(a.String()) {
		select {
		case err := <-a.done:
			t.Fatalf("client a ended while it waited: %v: %s", err, a)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("client a never said what it waits for; it said: %s", a)
		}
	}
	b := startClient(t, dir, planPath, "b", 0)
	c := startClient(t, dir, planPath, "c", 0)
	r := waitFor(t, res, "the master")
	require.NoError(t, r.err)
	for _, p := range []*procClient{a, b, c} {
		assert.NoError(t, waitFor(t, p.done, "client "+p.name), "client %s: %s", p.name, p)
	}
}
