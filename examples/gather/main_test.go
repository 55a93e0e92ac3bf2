package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/pzgo/pz/examples/internal/clitest"

	"github.com/pzgo/pz/runtimeview"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

// TestRanks runs the example on 1 to 4 in-process ranks and checks the
// last rank's lines: one per rank, in rank order, naming this host.
func TestRanks(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^rank (\d+) on (.*): (\d+\.\d) GiB free$`)
	for _, n := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var out strings.Builder // only the last rank writes
			err := runtimeview.RunLocal(t.Context(), n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				return run(ctx, rt, &out)
			})
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(lines) != n+1 {
				t.Fatalf("printed %q: %d lines, want %d (one per rank and the last)", out.String(), len(lines), n+1)
			}
			for r, l := range lines[:n] {
				m := line.FindStringSubmatch(l)
				if m == nil || m[1] != fmt.Sprint(r) || m[2] != host {
					t.Errorf("line %d is %q, want \"rank %d on %s: N.N GiB free\"", r, l, r, host)
				}
			}
			if want := fmt.Sprintf("gathered on rank %d of %d", n-1, n); lines[n] != want {
				t.Errorf("last line %q, want %q", lines[n], want)
			}
		})
	}
}

// TestArgs: the program takes no arguments; it ran with any, ignoring
// them. Now they are a usage error: status 2, naming them.
func TestArgs(t *testing.T) {
	clitest.Args(t, []clitest.Case{
		{Args: []string{"extra", "args"}, Want: "gather: arguments not understood: extra args (it takes none; PZ_RANKS=N sets the in-process ranks)\n"},
		{Args: []string{"-nosuchflag"}, Want: "flag provided but not defined: -nosuchflag"},
	}...)
}
