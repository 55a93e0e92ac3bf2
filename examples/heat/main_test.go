package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pzgo/pz/examples/internal/clitest"

	"github.com/pzgo/pz/runtimeview"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

// TestRanks runs the example on 1, 2, 4 and 5 in-process ranks (5 does
// not divide the 16 segments) and checks rank 0's rod against the steps
// computed here on the whole rod, and rank 0's line.
func TestRanks(t *testing.T) {
	want := make([]float64, segments*cells)
	for i := range want {
		if i >= len(want)/3 && i < 2*len(want)/3 { // the hot middle third
			want[i] = 100
		}
	}
	next := make([]float64, len(want))
	for range steps {
		for i, u := range want {
			l, r := 0.0, 0.0 // the ends are held at 0
			if i > 0 {
				l = want[i-1]
			}
			if i < len(want)-1 {
				r = want[i+1]
			}
			next[i] = u + alpha*(l-2*u+r)
		}
		want, next = next, want
	}
	line := regexp.MustCompile(`^heat: 16 segments x 40 steps over (\d+) ranks? \(local backend\): matches the sequential run; rank 0 sent (\d+) segments\n$`)
	for _, n := range []int{1, 2, 4, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var rod []float64
			err := runtimeview.RunLocal(t.Context(), n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				r, _, err := simulate(ctx, rt)
				if rt.Rank() == 0 {
					rod = r
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rod, want) {
				t.Errorf("the rod differs from the one computed here")
			}
			var out strings.Builder // only rank 0 writes
			err = runtimeview.RunLocal(t.Context(), n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				return run(ctx, rt, &out)
			})
			if err != nil {
				t.Fatal(err)
			}
			m := line.FindStringSubmatch(out.String())
			if m == nil || m[1] != fmt.Sprint(n) {
				t.Fatalf("printed %q, want a line over %s matching %s", out.String(), ranks(n), line)
			}
			if n == 1 && m[2] != "0" {
				t.Errorf("one rank sent %s segments, want 0", m[2])
			}
		})
	}
}

// TestArgs: the program takes no arguments; it ran with any, ignoring
// them. Now they are a usage error: status 2, naming them.
func TestArgs(t *testing.T) {
	clitest.Args(t, []clitest.Case{
		{Args: []string{"extra", "args"}, Want: "heat: arguments not understood: extra args (it takes none; PZ_RANKS=N sets the in-process ranks)\n"},
		{Args: []string{"-nosuchflag"}, Want: "flag provided but not defined: -nosuchflag"},
	}...)
}
