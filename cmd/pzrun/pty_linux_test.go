package main

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// openPTY returns a new pseudo-terminal's master and slave.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	require.NoError(t, unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	return m, s
}

// In a terminal, pzrun hands the terminal to the program's process group:
// Ctrl-C reaches the program alone, once (its finalizers run, status
// 130); Ctrl-Z stops the program and then pzrun, with the terminal back
// in pzrun's group, as the shell expects of its job; SIGCONT (fg) gives
// the terminal back to the program and continues it.
func TestTerminalCtrlCAndCtrlZ(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildPzrun(t)
	for _, ctrlZ := range []bool{false, true} {
		t.Run(fmt.Sprintf("ctrl-z=%v", ctrlZ), func(t *testing.T) {
			master, slave := openPTY(t)
			dir := t.TempDir()
			cmd := programCmd(t, bin, "loop", dir, 2)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
			// pzrun leads a session whose terminal is the pty, in its
			// foreground, as a shell's job.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			require.NoError(t, cmd.Start())
			slave.Close()
			ch := readLines(master)
			_, pgid := readyLine(t, waitLine(t, ch, "ready"))
			fg := func() int { return foreground(int(master.Fd())) }
			assert.Equal(t, pgid, fg(), "the program's group has the terminal")
			if ctrlZ {
				_, err := master.Write([]byte{0x1a}) // Ctrl-Z
				require.NoError(t, err)
				stoppedPzrun := make(chan error, 1)
				go func() {
					var info unix.Siginfo
					stoppedPzrun <- unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WSTOPPED, nil)
				}()
				select {
				case err := <-stoppedPzrun:
					require.NoError(t, err)
				case <-time.After(30 * time.Second):
					t.Fatal("pzrun did not stop with its program")
				}
				assert.Equal(t, cmd.Process.Pid, fg(), "the terminal is back in pzrun's group")
				require.NoError(t, cmd.Process.Signal(syscall.SIGCONT)) // fg
				waitFor(t, "the program's group has the terminal again", func() bool { return fg() == pgid })
			}
			_, err := master.Write([]byte{0x03}) // Ctrl-C
			require.NoError(t, err)
			assert.Equal(t, 130, waitExit(t, cmd))
			assert.Equal(t, 2, finalized(t, dir), "every rank's finalizer ran")
		})
	}
}
