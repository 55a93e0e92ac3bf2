package static

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ignoredINTClient starts client name as a process of its own that
// inherits SIGINT ignored, as a script's background job does, with its
// log on stderr; lines gets each stderr line, done its exit.
func ignoredINTClient(t *testing.T, dir, planPath, name string) (cmd *exec.Cmd, lines <-chan string, done <-chan error) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd = exec.Command("sh", "-c", `trap "" INT; exec "$0" -test.run '^$'`, exe)
	cmd.Env = append(os.Environ(), "PZ_STM_TEST_CLIENT="+name, "PZ_STM_TEST_PLAN="+planPath, "PZ_STM_DIR="+dir, "PZ_STM_TEST_LOG=1")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill() })
	ls, d := make(chan string, 64), make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			ls <- sc.Text()
		}
		close(ls)
		d <- cmd.Wait()
	}()
	return cmd, ls, d
}

// awaitLine returns the first line from lines that contains want, and
// every line read, failing the test if lines ends first.
func awaitLine(t *testing.T, lines <-chan string, want string) string {
	t.Helper()
	var seen []string
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("no line with %q; stderr:\n%s", want, strings.Join(seen, "\n"))
			}
			seen = append(seen, l)
			if strings.Contains(l, want) {
				return strings.Join(seen, "\n")
			}
		case <-timeout:
			t.Fatalf("no line with %q after 30s; stderr:\n%s", want, strings.Join(seen, "\n"))
		}
	}
}

// SIGINT ends a client's wait for a master, and its wait for the start,
// even in a process that inherited SIGINT ignored (a script's background
// job): EnterScheduler returns an error naming the signal, and a master
// that had the client goes on waiting for it. Before, such a client
// ignored SIGINT until the loop started.
func TestProcessSignalBeforeStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	plan := compileString(t, threeClients)
	planPath := writePlanFile(t, plan)

	t.Run("no master", func(t *testing.T) {
		dir := privateTestDir(t)
		cmd, lines, done := ignoredINTClient(t, dir, planPath, "a")
		awaitLine(t, lines, "waiting for a master") // dialing, its handler installed
		require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		out := awaitLine(t, lines, "got interrupt")
		err := waitFor(t, done, "client a")
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "client a: %v\n%s", err, out)
		assert.Equal(t, 1, exit.ExitCode(), out)
		assert.Contains(t, out, "no master answered on")
	})

	t.Run("waiting for the start", func(t *testing.T) {
		dir := privateTestDir(t)
		logs := make(chan string, 64)
		m, err := NewMaster(plan, WithDir(dir), WithLiveness(10*time.Second), WithLog(func(s string) {
			select {
			case logs <- s:
			default:
			}
		}))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan error, 1)
		go func() {
			_, err := m.Run(ctx)
			res <- err
		}()
		defer func() {
			cancel()
			<-res
		}()
		cmd, lines, done := ignoredINTClient(t, dir, planPath, "a")
		awaitLine(t, logs, "client a joined")
		require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		out := awaitLine(t, lines, "got interrupt while waiting for the start")
		err = waitFor(t, done, "client a")
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "client a: %v\n%s", err, out)
		assert.Equal(t, 1, exit.ExitCode(), out)
		awaitLine(t, logs, "client a left before the start; waiting for it again")
	})
}
