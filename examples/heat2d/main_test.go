package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/pzgo/pz/examples/internal/clitest"
	"github.com/pzgo/pz/runtimeview"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

// TestRanks runs the solver on 2 in-process ranks (a 1 x 2 grid) and on
// 4 (2 x 2), on a plate whose side the tiles do not divide, until it
// converges, with either convergence check, and checks rank 0's plate,
// steps and changes against the sequential solver's, bit for bit, and
// the line rank 0 prints.
func TestRanks(t *testing.T) {
	base := config{n: 40, b: 12, steps: 5000, every: 10, tol: 0.2, alpha: 0.2, hot: 100}
	want := sequential(base)
	if want.steps == base.steps || want.steps%base.every != 0 {
		t.Fatalf("the sequential run stopped after %d steps: the test wants one that converges at a check", want.steps)
	}
	for _, tc := range []struct {
		n     int
		redux bool
	}{{2, false}, {2, true}, {4, false}, {4, true}} {
		c := base
		c.redux = tc.redux
		n := tc.n
		t.Run(fmt.Sprintf("ranks=%d/redux=%v", n, c.redux), func(t *testing.T) {
			var got result
			var out strings.Builder
			err := runtimeview.RunLocal(t.Context(), n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				r, err := tiled(ctx, rt, c)
				if rt.Rank() == 0 {
					got = r
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if got.steps != want.steps || fmt.Sprint(got.changes) != fmt.Sprint(want.changes) {
				t.Errorf("stopped after %d steps with changes %v, want %d with %v", got.steps, got.changes, want.steps, want.changes)
			}
			if i := firstDiff(got.plate, want.plate); i >= 0 {
				t.Fatalf("cell (%d, %d) is %v, want %v", i/c.n, i%c.n, got.plate[i], want.plate[i])
			}
			if got.sent == 0 {
				t.Errorf("rank 0 sent no message on %d ranks", n)
			}
			err = runtimeview.RunLocal(t.Context(), n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				return run(ctx, rt, c, &out)
			})
			if err != nil {
				t.Fatal(err)
			}
			line := regexp.MustCompile(fmt.Sprintf(`^heat2d: 40 x 40 cells in 4 x 4 tiles over %d ranks \(\d x \d grid, local backend\): %d steps, last change [0-9.e-]+: matches the sequential run; rank 0 sent \d+ messages\n$`, n, want.steps))
			if !line.MatchString(out.String()) {
				t.Errorf("printed %q, want a line matching %s", out.String(), line)
			}
		})
	}
}

// TestBadConfig: a step count, tile or alpha the solver cannot use is
// an error on every rank before anything is registered.
func TestBadConfig(t *testing.T) {
	for _, c := range []config{
		{n: 10, b: 0, steps: 1, every: 1, alpha: 0.2},
		{n: 10, b: 4, steps: 1, every: 1, alpha: 0.3},
	} {
		err := runtimeview.RunLocal(t.Context(), 2, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
			return run(ctx, rt, c, nil)
		})
		if err == nil || !strings.Contains(err.Error(), "heat2d: -") {
			t.Errorf("%+v: got %v, want an error naming the flag", c, err)
		}
	}
}

// TestArgs: arguments left after the flags are a usage error.
func TestArgs(t *testing.T) {
	clitest.Args(t, []clitest.Case{
		{Args: []string{"extra"}, Want: "heat2d: arguments not understood: extra (it takes none; PZ_RANKS=N sets the in-process ranks)\n"},
		{Args: []string{"-nosuchflag"}, Want: "flag provided but not defined: -nosuchflag"},
	}...)
}

// BenchmarkTiled times the solver on 2 in-process ranks, for profiling.
func BenchmarkTiled(b *testing.B) {
	c := defaultConfig()
	c.steps = 200
	for b.Loop() {
		err := runtimeview.RunLocal(b.Context(), 2, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
			_, err := tiled(ctx, rt, c)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
