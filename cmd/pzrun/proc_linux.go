package main

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// childProcAttr returns the attributes pzrun starts a child with: a
// process group of its own, and SIGKILL from the kernel when the thread
// that started it ends (Pdeathsig), so that the child never outlives
// pzrun, even when pzrun is killed with SIGKILL (start it with
// startAndWait, on a thread that lives as long as the child).
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// stopped reports whether child pid has stopped since the last call,
// consuming the report; an exited child is left for exec.Cmd.Wait to reap
// (no WEXITED).
func stopped(pid int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WNOHANG, nil)
	return err == nil && info.Signo != 0
}
