package static

import (
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bigStartPlan is a plan of two clients whose start message is far
// larger than a Unix socket's buffer (about 200 KiB by default): client
// a's 64 runnables have names of 16 KiB, so that the start cannot wait
// in the socket for a client that does not read.
func bigStartPlan(t *testing.T) *Plan {
	var b strings.Builder
	b.WriteString(`
hyperepochs:
  - name: main
    period: 20ms
    resources: [cpu0, cpu1]
    epochs: [{name: frame}]
clients: [a, b]
runnables:
  - {name: b1, client: b, resource: cpu1, wcet: 100us}
`)
	long := strings.Repeat("x", 16<<10)
	for i := range 64 {
		fmt.Fprintf(&b, "  - {name: a%d%s, client: a, resource: cpu0, wcet: 10us}\n", i, long)
	}
	plan := compileString(t, b.String())
	// The whole plan travels in the start message.
	require.Greater(t, len(mustJSON(t, plan)), 1<<20)
	return plan
}

func mustJSON(t *testing.T, p *Plan) []byte {
	var b strings.Builder
	require.NoError(t, WritePlan(&b, p))
	return []byte(b.String())
}

// A client stopped (SIGSTOP) after it joined and before the last client
// came could not take its start message once that message filled its
// socket's buffer, and the master wrote it holding its lock, waiting
// for as long as the write took: the master stalled in start, stopped
// beating, the other clients never ran and left blaming the master, and
// the run never ended. The master now puts its messages in an outbox
// per client, written within the liveness bound: the stopped client
// fails the run (ErrAborted) within about that bound, named by the
// master and by the other clients.
func TestProcessClientStoppedAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	plan := bigStartPlan(t)
	planPath := writePlanFile(t, plan)
	dir := privateTestDir(t)
	// The start delay exceeds the liveness bound, so that the master
	// finds the write's failure before it could find client a behind
	// its plan (Master.behind).
	const liveness = 2 * time.Second
	joined := make(chan string, 16)
	res := startMaster(t, plan, WithDir(dir), WithLiveness(liveness), WithStartDelay(3*time.Second),
		WithLog(func(s string) {
			t.Log(s)
			if strings.Contains(s, " joined (pid ") {
				joined <- s
			}
		}))
	a := startClient(t, dir, planPath, "a", 0)
	t.Cleanup(func() { a.cmd.Process.Signal(syscall.SIGCONT) })
	require.Contains(t, waitFor(t, joined, "client a to join"), "client a joined")
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGSTOP))
	began := time.Now()
	b := startClient(t, dir, planPath, "b", 0)
	r := waitFor(t, res, "the master")
	took := time.Since(began)
	require.ErrorIs(t, r.err, ErrAborted)
	want := fmt.Sprintf("client a (pid %d) did not take the master's start message within 2s (the liveness bound): its process is stopped (state T", a.cmd.Process.Pid)
	assert.Contains(t, r.err.Error(), want)
	// The bound and the drain after the abort (both the liveness bound),
	// with a wide margin for a loaded machine.
	assert.Less(t, took, 2*liveness+8*time.Second, "the master must not wait on the stopped client")
	err := waitFor(t, b.done, "client b")
	assert.Equal(t, 1, exitCode(t, err), "client b fails, not blaming the master (exitMasterLost): %s", b)
	assert.Contains(t, b.String(), want, "client b names the stopped client")
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGCONT))
	a.cmd.Process.Kill()
	waitFor(t, a.done, "client a")
}

// Beats offered to a client that does not read stop once a few wait
// unread (offerBacklog), so that the socket keeps room for the
// messages that matter (start, abort, refused), which then go out at
// once.
func TestBeatsLeaveRoomInTheSocket(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	files := []*os.File{os.NewFile(uintptr(fds[0]), "master"), os.NewFile(uintptr(fds[1]), "client")}
	conns := make([]net.Conn, 2)
	for i, f := range files {
		conns[i], err = net.FileConn(f)
		require.NoError(t, err)
		f.Close()
		defer conns[i].Close()
	}
	l := newSockLink(conns[0])
	beat := &message{Type: msgBeat, Liveness: int64(time.Second), MasterPID: os.Getpid()}
	for range 2000 { // far more than the socket holds
		require.NoError(t, l.offer(beat))
	}
	n, ok := unreadBytes(conns[0])
	if !ok {
		t.Skip("this system cannot say what a socket's peer has not read")
	}
	assert.LessOrEqual(t, n, offerBacklog+4<<10, "beats wait unread")
	// A start of 64 KiB still fits, well within a deadline.
	big := &message{Type: msgAbort, Reason: strings.Repeat("x", 64<<10)}
	require.NoError(t, l.sendBy(big, time.Now().Add(10*time.Second)))
}
