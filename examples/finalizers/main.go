// Command finalizers ties two libraries' teardown to the runtime with
// StackCallback: at Close they run newest first (LIFO), before MPI is
// finalized, each exactly once even if one fails.
//
//	PZ_RANKS=2 go run ./examples/finalizers
//	go build -tags mpi -o /tmp/finalizers ./examples/finalizers && mpirun -n 2 --oversubscribe /tmp/finalizers
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/pzgo/pz/examples/internal/cli"

	"github.com/pzgo/pz/runtimeview"
)

// library stands for a library with global state that must be torn down
// before the program's communication layer goes away.
type library struct {
	name string
	mu   *sync.Mutex
	log  *[]string
}

// Finalize tears the library down: it records its name.
func (l library) Finalize() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.log = append(*l.log, l.name)
	return nil
}

func main() {
	cli.Parse("finalizers", cli.NoArgs)
	if err := run(context.Background(), 0, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run runs the program on n ranks (0: as runtimeview.Run chooses), checks
// that every rank of this process finalized its libraries newest first,
// and prints a line on out.
func run(ctx context.Context, n int, out io.Writer, opts ...runtimeview.Option) error {
	var (
		mu    sync.Mutex
		order = map[int]*[]string{} // this process's ranks: all of them in process, one under mpirun
		size  int                   // the job's ranks
	)
	err := runtimeview.Run(ctx, n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		mine := &[]string{}
		mu.Lock()
		order[rt.Rank()] = mine
		size = rt.Size()
		mu.Unlock()
		if err := register(rt, &mu, mine); err != nil {
			return err
		}
		rt.Logger().Info("registered three finalizers")
		return nil // Run closes the view: the finalizers run now
	}, opts...)
	if err != nil {
		return err
	}
	return report(order, size, out)
}

// register starts three libraries on rt, io first, and stacks each one's
// Finalize; each appends its name to done (under mu) when it runs.
func register(rt *runtimeview.RuntimeView, mu *sync.Mutex, done *[]string) error {
	for _, name := range []string{"io", "solver", "plotting"} {
		if err := rt.StackCallback(library{name: name, mu: mu, log: done}.Finalize); err != nil {
			return fmt.Errorf("stacking %s's finalizer: %w", name, err)
		}
	}
	return nil
}

// report checks the order in which each rank of order (rank: the names
// its libraries finalized, in order) finalized them, of a job of size
// ranks, and prints a line on out.
func report(order map[int]*[]string, size int, out io.Writer) error {
	for rank, o := range order {
		if got := strings.Join(*o, ","); got != "plotting,solver,io" {
			return fmt.Errorf("rank %d finalized in order %s, want plotting,solver,io", rank, got)
		}
	}
	if len(order) == size {
		fmt.Fprintf(out, "%d rank(s) finalized in LIFO order: plotting, solver, io\n", len(order))
		return nil
	}
	// Under mpirun each process reports only its own ranks.
	ids := make([]int, 0, len(order))
	for rank := range order {
		ids = append(ids, rank)
	}
	sort.Ints(ids)
	ranks := make([]string, len(ids))
	for i, rank := range ids {
		ranks[i] = strconv.Itoa(rank)
	}
	fmt.Fprintf(out, "this process's %d of the job's %d ranks (rank %s) finalized in LIFO order: plotting, solver, io\n",
		len(order), size, strings.Join(ranks, ", "))
	return nil
}
