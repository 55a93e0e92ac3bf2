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

// TestRanks runs the example on 1 to 4 in-process ranks (run checks the
// sum on every rank against the closed form) and checks rank 0's line
// against the sum of the ranks' vectors added up here.
func TestRanks(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var out strings.Builder // only rank 0 writes
			err := runtimeview.RunLocal(t.Context(), n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				return run(ctx, rt, &out)
			})
			if err != nil {
				t.Fatal(err)
			}
			sum := make([]float64, 4)
			for r := range n {
				for i := range sum {
					sum[i] += float64((i + 1) * r)
				}
			}
			noun := "ranks"
			if n == 1 {
				noun = "rank"
			}
			want := fmt.Sprintf("allreduce over %d %s (local backend): %v\n", n, noun, sum)
			if out.String() != want {
				t.Errorf("printed %q, want %q", out.String(), want)
			}
		})
	}
}

// TestArgs: the program takes no arguments; it ran with any, ignoring
// them. Now they are a usage error: status 2, naming them.
func TestArgs(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"extra", "args"}, "allreduce: arguments not understood: extra args (it takes none; PZ_RANKS=N sets the in-process ranks)\n"},
		{[]string{"-nosuchflag"}, "flag provided but not defined: -nosuchflag"},
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
