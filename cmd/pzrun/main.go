// Command pzrun launches pz programs and runs its built-in apps.
//
//	pzrun [-n N] APP [flags]
//
// Under mpirun (a binary built with -tags mpi) it joins the MPI world: every
// process is one rank. With -n N and no MPI launcher it runs N in-process
// ranks on the embedded backend. With neither it runs one rank. `pzrun help`
// lists the apps; `pzrun APP -h` lists an app's flags.
//
// An APP with a '/' is a program of yours (a pz program calling
// runtimeview.Run): `pzrun -n N ./prog args` runs it with N in-process
// ranks (PZ_RANKS=N), and `mpirun -n N pzrun ./prog` starts it as each
// process's rank. The program runs in a process group of its own (with
// the terminal, when pzrun has it); pzrun passes a SIGINT or SIGTERM it
// receives on to that group, once, kills the group on a second signal or
// when the program outlives its grace period, and exits with the
// program's status.
//
// Exit status: 0 on success, 1 when the app failed, 2 for a usage error (an
// unknown app or a bad flag), 128+signo when stopped by SIGINT or SIGTERM.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/pzgo/pz/runtimeview"
)

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	again := make(chan os.Signal, 1)
	relayed := make(chan struct{})
	go func() {
		defer close(relayed)
		relaySignals(sigs, cancel, again, time.Now)
	}()
	code, program := runApp(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv, again)
	signal.Stop(sigs)
	close(sigs)
	<-relayed
	// A launched program's status is its own (runProgram): it chose it
	// after the signal pzrun passed on.
	if s := signalOf(ctx); s != nil && !program {
		code = runtimeview.ExitStatus(s)
	}
	cancel(nil)
	os.Exit(code)
}
