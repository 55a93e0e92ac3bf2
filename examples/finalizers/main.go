// Command finalizers ties two libraries' teardown to the runtime with
// StackCallback: at Close they run newest first (LIFO), before MPI is
// finalized, each exactly once even if one fails.
//
//	PZ_RANKS=2 go run ./examples/finalizers
//	go build -tags mpi -o /tmp/finalizers ./examples/finalizers && mpirun -n 2 /tmp/finalizers
package main

import (
	"context"
	"fmt"
	"log"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/pzgo/pz/runtimeview"
)

// library stands for a library with global state that must be torn down
// before the program's communication layer goes away.
type library struct {
	name string
	mu   *sync.Mutex
	log  *[]string
}

func (l library) Finalize() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.log = append(*l.log, l.name)
	return nil
}

func main() {
	var (
		mu    sync.Mutex
		order = map[int]*[]string{} // this process's ranks: all of them in process, one under mpirun
		size  int                   // the job's ranks
	)
	err := runtimeview.Run(context.Background(), 0, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		mine := &[]string{}
		mu.Lock()
		order[rt.Rank()] = mine
		size = rt.Size()
		mu.Unlock()
		for _, name := range []string{"io", "solver", "plotting"} {
			if err := rt.StackCallback(library{name: name, mu: &mu, log: mine}.Finalize); err != nil {
				return err
			}
		}
		rt.Logger().Info("registered three finalizers")
		return nil // Run closes the view: the finalizers run now
	})
	if err != nil {
		log.Fatal(err)
	}
	for rank, o := range order {
		if got := strings.Join(*o, ","); got != "plotting,solver,io" {
			log.Fatalf("rank %d finalized in order %s, want plotting,solver,io", rank, got)
		}
	}
	if len(order) == size {
		fmt.Printf("%d rank(s) finalized in LIFO order: plotting, solver, io\n", len(order))
		return
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
	fmt.Printf("this process's %d of the job's %d ranks (rank %s) finalized in LIFO order: plotting, solver, io\n",
		len(order), size, strings.Join(ranks, ", "))
}
