//go:build !linux

package static

import (
	"errors"
	"net"
	"os"
	"time"
)

var processStart = time.Now()

// monoSyscall approximates a machine-wide monotonic clock with this
// process's; clients in separate processes need Linux.
func monoSyscall() int64 { return int64(time.Since(processStart)) }

func sleepAbs(t int64) {
	if d := t - monoSyscall(); d > 0 {
		time.Sleep(time.Duration(d))
	}
}

func pinThread(core int) error { return errors.New("pinning threads needs Linux") }

func peerUID(c *net.UnixConn) (uid, pid int, err error) {
	return 0, 0, errors.New("peer credentials need Linux")
}

func ownerUID(st os.FileInfo) (int, bool) { return 0, false }

func yieldThread() {}

func preciseTimers() error { return nil }

// procState cannot tell a process's state without Linux's /proc.
func procState(pid int) byte { return 0 }

// unreadBytes cannot tell what a socket's peer has not read without
// Linux's SIOCOUTQ.
func unreadBytes(c net.Conn) (int, bool) { return 0, false }
