package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pzgo/pz/internal/launch"
	"github.com/pzgo/pz/runtimeview"
)

// isProgram says whether pzrun's APP argument names a program to launch
// rather than a built-in app: a path (it has a '/'), as a shell runs
// ./prog rather than a command of that name.
func isProgram(name string) bool { return strings.ContainsRune(name, '/') }

// runProgram launches a user's pz program: with -n N it runs it with N
// in-process ranks (PZ_RANKS=N, which runtimeview.Run reads); under an
// MPI launcher each pzrun process starts the program as its rank, which
// joins the MPI world itself. The program's stdin, stdout and stderr are
// pzrun's; SIGINT or SIGTERM to pzrun (ctx's end) is passed on, and pzrun
// exits with the program's status.
func runProgram(ctx context.Context, n int, path string, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	if info := launch.Detect(getenv); info.Launched() && n > 0 {
		fmt.Fprintf(stderr, "pzrun: -n %d given under an MPI launcher (%s); let mpirun choose the ranks: mpirun -n %d pzrun %s\n", n, info.Launcher, n, path)
		return exitUsage
	}
	if n < 0 {
		fmt.Fprintf(stderr, "pzrun: -n must be at least 1, got %d\n", n)
		return exitUsage
	}
	if st, err := os.Stat(path); err != nil {
		fmt.Fprintf(stderr, "pzrun: %v (a program to launch is a path, e.g. ./prog; the built-in apps are %s)\n", err, appNames())
		return exitUsage
	} else if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
		fmt.Fprintf(stderr, "pzrun: %s is not an executable file: build the program first (go build -o %s .)\n", path, path)
		return exitUsage
	}
	cmd := exec.Command(path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.Env = os.Environ()
	if n > 0 {
		cmd.Env = append(withoutVar(cmd.Env, runtimeview.EnvRanks), runtimeview.EnvRanks+"="+strconv.Itoa(n))
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "pzrun: %v\n", err)
		return exitFail
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		// Pass the stop on and give the program time to end gracefully.
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			err = <-done
		}
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	fmt.Fprintf(stderr, "pzrun: %s: %v\n", path, err)
	return exitFail
}

// withoutVar removes name from an environment list.
func withoutVar(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
