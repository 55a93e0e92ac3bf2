// Command gather gathers every rank's host name and free RAM on the last
// rank, through that rank's ResourceSet: resourceset.GatherValues rooted at
// rt.ResourceSet(size-1).RAM() returns the values there and ok == false
// everywhere else.
//
//	PZ_RANKS=4 go run ./examples/gather
//	go build -tags mpi -o /tmp/gather ./examples/gather && mpirun -n 4 --oversubscribe /tmp/gather
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/pzgo/pz/examples/internal/cli"

	"github.com/pzgo/pz/resourceset"
	"github.com/pzgo/pz/runtimeview"
)

// A report is what each rank sends to the root.
type report struct {
	Rank      int
	Host      string
	FreeBytes uint64
}

func main() {
	cli.Parse("gather", cli.NoArgs)
	err := runtimeview.Run(context.Background(), 0, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		return run(ctx, rt, os.Stdout)
	})
	if err != nil {
		log.Fatal(err)
	}
}

// run gathers every rank's report on the last rank, which prints them on
// out, one line each in rank order, and a last line.
func run(ctx context.Context, rt *runtimeview.RuntimeView, out io.Writer) error {
	me := rt.MyResourceSet()
	mine := report{Rank: rt.Rank(), Host: me.Host().Hostname, FreeBytes: me.RAM().AvailableBytes()}

	root := rt.ResourceSet(rt.Size() - 1)
	all, ok, err := resourceset.GatherValues(ctx, root.RAM(), mine)
	if err != nil {
		return err
	}
	if !ok {
		return nil // not the root: nothing to print
	}
	for i, r := range all {
		if r.Rank != i {
			return fmt.Errorf("gathered out of order: slot %d holds rank %d", i, r.Rank)
		}
		fmt.Fprintf(out, "rank %d on %s: %.1f GiB free\n", r.Rank, r.Host, float64(r.FreeBytes)/(1<<30))
	}
	fmt.Fprintf(out, "gathered on rank %d of %d\n", rt.Rank(), rt.Size())
	return nil
}
