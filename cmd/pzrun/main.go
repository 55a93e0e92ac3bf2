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
// process's rank; pzrun passes SIGINT and SIGTERM on and exits with its
// status.
//
// Exit status: 0 on success, 1 when the app failed, 2 for a usage error (an
// unknown app or a bad flag), 128+signo when stopped by SIGINT or SIGTERM.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/pzgo/pz/runtimeview"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	got := make(chan os.Signal, 1)
	go func() {
		s, ok := <-sigs
		if !ok {
			return
		}
		got <- s
		cancel() // every rank sees its context canceled and returns
		// A second signal does not wait for ranks that ignore theirs.
		if s2, ok := <-sigs; ok {
			fmt.Fprintf(os.Stderr, "pzrun: %v again: exiting without waiting for the ranks\n", s2)
			os.Exit(runtimeview.ExitStatus(s2))
		}
	}()
	code, program := runApp(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	signal.Stop(sigs)
	close(sigs)
	select {
	case s := <-got:
		if !program { // a launched program's status is its own (runProgram)
			code = runtimeview.ExitStatus(s)
		}
	default:
	}
	cancel()
	os.Exit(code)
}
