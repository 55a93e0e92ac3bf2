package main

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// childProcAttr returns the attributes pzrun starts a child with: a
// process group of its own. macOS has no parent-death signal: a child
// outlives a pzrun killed with SIGKILL (pzrun's other ends, signals
// included, end its children first).
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// sstop is a process's state while it is stopped (p_stat, macOS's
// sys/proc.h).
const sstop = 4

// stopped reports whether child pid is stopped now (its state, read with
// sysctl kern.proc.pid: macOS has no waitid in x/sys/unix); an exited
// child is left for exec.Cmd.Wait to reap.
func stopped(pid int) bool {
	p, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	return err == nil && p.Proc.P_stat == sstop
}
