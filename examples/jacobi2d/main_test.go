package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pzgo/pz/examples/internal/clitest"

	"github.com/pzgo/pz/runtimeview"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

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
	clitest.Args(t, []clitest.Case{
		{Args: []string{"extra", "args"}, Want: "jacobi2d: arguments not understood: extra args (it takes only the flags -rows, -cols, -b, -steps and -every)\n"},
		{Args: []string{"-nosuchflag"}, Want: "flag provided but not defined: -nosuchflag"},
		{Args: []string{"-every", "0"}, Want: "jacobi2d: -every 0: want at least 1"},
		{Args: []string{"-rows", "100", "extra"}, Want: "jacobi2d: arguments not understood: extra ("},
	}...)
}
