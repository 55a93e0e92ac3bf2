package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/pzgo/pz/runtimeview"
)

// asMain, set in a test binary's environment, makes it run main instead
// of the tests: TestArgs starts the program so.
const asMain = "PZ_EXAMPLE_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRanks runs the example with its default flags on 1 to 4 in-process
// ranks; run checks the plate and the residuals on rank 0.
func TestRanks(t *testing.T) {
	for _, ranks := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprint(ranks), func(t *testing.T) {
			err := runtimeview.RunLocal(t.Context(), ranks, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				return run(ctx, rt, defaultConfig())
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCheckFlags: -every 0 divided by zero in every rank (a panic),
// -every -1 computed the residual at every step, and -steps -1 ran and
// printed "-1 steps ... matches the sequential run".
func TestCheckFlags(t *testing.T) {
	for _, c := range []struct {
		rows, cols, b, steps, every int
		want                        string // in the error; "" for none
	}{
		{128, 192, 32, 30, 10, ""},
		{100, 150, 32, 0, 10, ""},
		{128, 192, 32, 30, 0, "-every 0"},
		{128, 192, 32, 30, -1, "-every -1"},
		{128, 192, 32, -1, 10, "-steps -1"},
		{0, 192, 32, 30, 10, "at least 1"},
		{128, 192, 0, 30, 10, "at least 1"},
	} {
		err := checkFlags(c.rows, c.cols, c.b, c.steps, c.every)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v, want an error saying %q", c, err, c.want)
		}
	}
}

// TestArgs: the program takes no arguments; it ran with any, ignoring
// them. Now they are a usage error: status 2, naming them.
func TestArgs(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"extra", "args"}, "jacobi2d: arguments not understood: extra args (it takes only the flags -rows, -cols, -b, -steps and -every)\n"},
		{[]string{"-nosuchflag"}, "flag provided but not defined: -nosuchflag"},
		{[]string{"-every", "0"}, "jacobi2d: -every 0: want at least 1"},
		{[]string{"-rows", "100", "extra"}, "jacobi2d: arguments not understood: extra ("},
	} {
		cmd := exec.CommandContext(t.Context(), os.Args[0], c.args...)
		cmd.Env = append(os.Environ(), asMain+"=1")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("%q: %v, want exit status 2; stderr %q", c.args, err, stderr.String())
		}
		if !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: stderr %q, want it to contain %q", c.args, stderr.String(), c.want)
		}
		if stdout.Len() > 0 {
			t.Errorf("%q: printed %q, want nothing (it did not run)", c.args, stdout.String())
		}
	}
}
