package static

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// monoSyscall reads CLOCK_MONOTONIC, which every process of the machine
// shares.
func monoSyscall() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("static: clock_gettime(CLOCK_MONOTONIC): %v", err)) // cannot fail on Linux
	}
	return ts.Nano()
}

// sleepAbs sleeps the calling thread until CLOCK_MONOTONIC reaches t (ns),
// as cyclictest does (clock_nanosleep with TIMER_ABSTIME).
func sleepAbs(t int64) {
	ts := unix.NsecToTimespec(t)
	for {
		err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// pinThread binds the calling OS thread to core; the caller has locked
// the goroutine to its thread.
func pinThread(core int) error {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return err
	}
	if !set.IsSet(core) {
		return fmt.Errorf("core %d is not among the %d this process may use", core, set.Count())
	}
	set.Zero()
	set.Set(core)
	return unix.SchedSetaffinity(0, &set)
}

// peerUID returns the user id of the process at the other end of a Unix
// socket connection (SO_PEERCRED).
func peerUID(c *net.UnixConn) (uid, pid int, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, 0, err
	}
	if cerr != nil {
		return 0, 0, cerr
	}
	return int(cred.Uid), int(cred.Pid), nil
}

// ownerUID returns the owner of a file.
func ownerUID(st os.FileInfo) (int, bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(s.Uid), true
}

// yieldThread gives the core to another thread that wants it, if any
// (sched_yield): a thread spinning before its planned start must not
// starve a runnable of another client pinned to the same core.
func yieldThread() { unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

// preciseTimers sets the calling thread's timer slack to 1 ns
// (PR_SET_TIMERSLACK): a normal thread's sleeps otherwise end up to 50 µs
// late, so that the kernel can group wake-ups.
func preciseTimers() error { return unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0) }

// procState returns the state letter of process pid as /proc/PID/stat
// gives it (R running, S sleeping, D disk wait, T stopped, t traced, Z
// zombie, X dead), 'X' when there is no such process, and 0 when it
// cannot tell.
func procState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return 'X' // ESRCH: it is being reaped as the file is read
	}
	if err != nil {
		return 0
	}
	// "PID (COMM) S ...": COMM may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// unreadBytes returns how many bytes sent on the Unix socket c its peer
// has not read yet (SIOCOUTQ, with the kernel's per-message overhead),
// and false when it cannot tell.
func unreadBytes(c net.Conn) (int, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var n int
	var ierr error
	if err := raw.Control(func(fd uintptr) {
		n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
	}); err != nil || ierr != nil {
		return 0, false
	}
	return n, true
}
