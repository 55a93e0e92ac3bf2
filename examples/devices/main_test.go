package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pzgo/pz/examples/internal/clitest"

	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/runtimeview"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

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
	clitest.Args(t, []clitest.Case{
		{Args: []string{"extra", "args"}, Want: "devices: arguments not understood: extra args (it takes none; PZ_RANKS=N sets the in-process ranks)\n"},
		{Args: []string{"-nosuchflag"}, Want: "flag provided but not defined: -nosuchflag"},
	}...)
}
