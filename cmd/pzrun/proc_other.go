//go:build !linux && !darwin

package main

import "syscall"

// childProcAttr returns the attributes pzrun starts a child with: a
// process group of its own. There is no parent-death signal here: a
// child outlives a pzrun killed with SIGKILL (pzrun's other ends,
// signals included, end its children first).
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// stopped reports false: pzrun cannot tell here, without reaping it,
// whether its child has stopped, so a Ctrl-Z that stops the program does
// not stop pzrun with it (SIGTSTP sent to pzrun still stops the program).
func stopped(int) bool { return false }
