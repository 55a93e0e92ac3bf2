package main

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// foregroundTTY returns the descriptor of the first of files that is a
// terminal whose foreground process group is pzrun's, or -1: the
// terminal pzrun may hand to the program it launches. pzrun in the
// background (`pzrun ./prog &`) hands nothing.
func foregroundTTY(files ...any) int {
	for _, f := range files {
		if f, ok := f.(*os.File); ok && f != nil {
			fd := int(f.Fd())
			if pg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP); err == nil && pg == unix.Getpgrp() {
				return fd
			}
		}
	}
	return -1
}

// A jobControl relays job control between pzrun and the process group of
// the program it launched, so that the two act as the one job the shell
// started: SIGTSTP to pzrun stops the program; when the program stops
// (Ctrl-Z in its terminal), pzrun takes the terminal back and stops too
// (its whole group when it had the terminal: the shell sees its job
// stopped); SIGCONT to pzrun (fg, bg) gives the terminal back to the
// program when pzrun's group has it, and continues the program. Its
// methods are called from one goroutine.
type jobControl struct {
	pgid    int // the program's process group
	tty     int // the terminal handed to the program, or -1
	signals chan os.Signal
}

// startJobControl starts relaying for the program whose process group is
// pgid, which was given terminal tty (-1: none). Signals arrive on
// j.signals, for handle; stop ends the relay.
func startJobControl(pgid, tty int) *jobControl {
	j := &jobControl{pgid: pgid, tty: tty, signals: make(chan os.Signal, 8)}
	if tty >= 0 {
		// Outside the terminal's foreground group, setting that group
		// (and writing, under stty tostop) raises SIGTTOU, which stops
		// the process unless it ignores the signal. Ignored only once the
		// program has started: a child inherits ignored signals.
		signal.Ignore(syscall.SIGTTOU)
	}
	signal.Notify(j.signals, syscall.SIGCHLD, syscall.SIGTSTP, syscall.SIGCONT)
	j.handle(syscall.SIGCHLD) // a stop before Notify
	return j
}

// handle acts on one signal pzrun received.
func (j *jobControl) handle(s os.Signal) {
	switch s {
	case syscall.SIGTSTP:
		signalGroup(j.pgid, syscall.SIGTSTP) // its stop stops pzrun (SIGCHLD)
	case syscall.SIGCHLD:
		if !stopped(j.pgid) {
			return
		}
		j.takeTerminal()
		if j.tty >= 0 {
			// What the terminal's Ctrl-Z stops without pzrun: its
			// foreground group, the one pzrun is in.
			_ = syscall.Kill(0, syscall.SIGSTOP)
		} else {
			_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		}
	case syscall.SIGCONT:
		j.giveTerminal()
		signalGroup(j.pgid, syscall.SIGCONT)
	}
}

// stop ends the relay and takes the terminal back for pzrun's group.
func (j *jobControl) stop() {
	signal.Stop(j.signals)
	j.takeTerminal()
	if j.tty >= 0 {
		signal.Reset(syscall.SIGTTOU)
	}
}

// giveTerminal makes the program's group the terminal's foreground when
// pzrun's group is (not after bg).
func (j *jobControl) giveTerminal() {
	if j.tty >= 0 && foreground(j.tty) == unix.Getpgrp() {
		_ = unix.IoctlSetPointerInt(j.tty, unix.TIOCSPGRP, j.pgid)
	}
}

// takeTerminal makes pzrun's group the terminal's foreground when the
// program's group is.
func (j *jobControl) takeTerminal() {
	if j.tty >= 0 && foreground(j.tty) == j.pgid {
		_ = unix.IoctlSetPointerInt(j.tty, unix.TIOCSPGRP, unix.Getpgrp())
	}
}

// foreground returns the foreground process group of terminal fd, or -1.
func foreground(fd int) int {
	pg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil {
		return -1
	}
	return pg
}
