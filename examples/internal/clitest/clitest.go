// Package clitest tests an example program's command line by starting
// its own test binary as the program: Main in the package's TestMain,
// then Args.
package clitest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// asMain, set in a test binary's environment, makes it run the program's
// main instead of the tests.
const asMain = "PZ_EXAMPLE_AS_MAIN"

// Main is a TestMain: it runs main when Args started the binary, the
// tests otherwise.
func Main(m *testing.M, main func()) {
	if os.Getenv(asMain) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A Case is a command line that the program refuses.
type Case struct {
	Args []string
	Want string // in stderr
}

// T is what Args needs of a test: a *testing.T.
type T interface {
	Helper()
	Errorf(format string, args ...any)
	Context() context.Context
}

// Args runs the program with each case's arguments and checks that it
// exits with status 2, says Want on stderr and prints nothing.
func Args(t T, cases ...Case) {
	t.Helper()
	for _, c := range cases {
		cmd := exec.CommandContext(t.Context(), os.Args[0], c.Args...)
		cmd.Env = append(os.Environ(), asMain+"=1")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("%q: %v, want exit status 2; stderr %q", c.Args, err, stderr.String())
		}
		if !strings.Contains(stderr.String(), c.Want) {
			t.Errorf("%q: stderr %q, want it to contain %q", c.Args, stderr.String(), c.Want)
		}
		if stdout.Len() > 0 {
			t.Errorf("%q: printed %q, want nothing (it did not run)", c.Args, stdout.String())
		}
	}
}
