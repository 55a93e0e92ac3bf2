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
	clitest.Args(t, []clitest.Case{
		{Args: []string{"extra", "args"}, Want: "allreduce: arguments not understood: extra args (it takes none; PZ_RANKS=N sets the in-process ranks)\n"},
		{Args: []string{"-nosuchflag"}, Want: "flag provided but not defined: -nosuchflag"},
	}...)
}
