package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/pzgo/pz/hardware/accel"
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

// TestRanks runs the example on 1, 2 and 4 in-process ranks (run checks
// the collective and the tiles on every rank) and checks rank 0's line:
// on one rank it said "devices over 1 ranks".
func TestRanks(t *testing.T) {
	for _, c := range []struct {
		ranks int
		want  string
	}{
		{1, "devices over 1 rank (local backend): AllReduceDevice 0;"},
		{2, "devices over 2 ranks (local backend): AllReduceDevice 1;"},
		{4, "devices over 4 ranks (local backend): AllReduceDevice 6;"},
	} {
		t.Run(fmt.Sprint(c.ranks), func(t *testing.T) {
			var out bytes.Buffer // only rank 0 writes
			err := runtimeview.RunLocal(t.Context(), c.ranks, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				return run(ctx, rt, &out)
			}, runtimeview.WithSimDevices(accel.SimConfig{Memory: 4 << 20}))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(out.String(), c.want) {
				t.Errorf("rank 0 printed %q, want it to start with %q", out.String(), c.want)
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
		{[]string{"extra", "args"}, "devices: arguments not understood: extra args (it takes none; PZ_RANKS=N sets the in-process ranks)\n"},
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
