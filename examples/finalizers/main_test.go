package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/pzgo/pz/examples/internal/clitest"

	"go.uber.org/zap/zaptest"

	"github.com/pzgo/pz/logger"
	"github.com/pzgo/pz/runtimeview"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

// lifo is the order the finalizers must run in: the reverse of the
// libraries' start, io, solver, plotting.
const lifo = "plotting,solver,io"

// TestRanks runs the example's ranks on 1, 2, 3 and 4 in-process ranks:
// no finalizer runs before the rank returns, and then each rank's run
// newest first, once each; and the program's line.
func TestRanks(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var mu sync.Mutex
			done := make([][]string, n)
			err := runtimeview.RunLocal(t.Context(), n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				if err := register(rt, &mu, &done[rt.Rank()]); err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				if len(done[rt.Rank()]) > 0 {
					return fmt.Errorf("rank %d: %v finalized before Close", rt.Rank(), done[rt.Rank()])
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for rank, d := range done {
				if got := strings.Join(d, ","); got != lifo {
					t.Errorf("rank %d finalized %s, want %s", rank, got, lifo)
				}
			}
			var out strings.Builder
			if err := run(t.Context(), n, &out, runtimeview.WithSignals(false), runtimeview.WithLogOptions(logger.WithCore(zaptest.NewLogger(t).Core()))); err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("%d rank(s) finalized in LIFO order: plotting, solver, io\n", n); out.String() != want {
				t.Errorf("printed %q, want %q", out.String(), want)
			}
		})
	}
}

// TestReport checks the lines of a process that holds some of the
// job's ranks (under mpirun, one), and the error for an order other
// than LIFO.
func TestReport(t *testing.T) {
	fifo := []string{"io", "solver", "plotting"}
	right := strings.Split(lifo, ",")
	for _, c := range []struct {
		order   map[int]*[]string
		size    int
		want    string // printed
		wantErr string
	}{
		{map[int]*[]string{0: &right, 1: &right}, 2, "2 rank(s) finalized in LIFO order: plotting, solver, io\n", ""},
		{map[int]*[]string{2: &right}, 4, "this process's 1 of the job's 4 ranks (rank 2) finalized in LIFO order: plotting, solver, io\n", ""},
		{map[int]*[]string{3: &right, 1: &right}, 4, "this process's 2 of the job's 4 ranks (rank 1, 3) finalized in LIFO order: plotting, solver, io\n", ""},
		{map[int]*[]string{1: &fifo}, 2, "", "rank 1 finalized in order io,solver,plotting, want plotting,solver,io"},
	} {
		var out strings.Builder
		err := report(c.order, c.size, &out)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%d ranks of %d: %v", len(c.order), c.size, err)
		case c.wantErr != "" && (err == nil || err.Error() != c.wantErr):
			t.Errorf("%d ranks of %d: error %v, want %q", len(c.order), c.size, err, c.wantErr)
		}
		if out.String() != c.want {
			t.Errorf("%d ranks of %d: printed %q, want %q", len(c.order), c.size, out.String(), c.want)
		}
	}
}

// TestArgs: the program takes no arguments; it ran with any, ignoring
// them. Now they are a usage error: status 2, naming them.
func TestArgs(t *testing.T) {
	clitest.Args(t, []clitest.Case{
		{Args: []string{"extra", "args"}, Want: "finalizers: arguments not understood: extra args (it takes none; PZ_RANKS=N sets the in-process ranks)\n"},
		{Args: []string{"-nosuchflag"}, Want: "flag provided but not defined: -nosuchflag"},
	}...)
}
