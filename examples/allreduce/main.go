// Command allreduce sums a vector across every rank with
// runtimeview.AllReduce and checks the result on each rank.
//
//	PZ_RANKS=4 go run ./examples/allreduce                 # 4 in-process ranks
//	go build -tags mpi -o /tmp/allreduce ./examples/allreduce && mpirun -n 4 --oversubscribe /tmp/allreduce
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/pzgo/pz/examples/internal/cli"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/runtimeview"
)

func main() {
	cli.Parse("allreduce", cli.NoArgs)
	err := runtimeview.Run(context.Background(), 0, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		return run(ctx, rt, os.Stdout)
	})
	if err != nil {
		log.Fatal(err)
	}
}

// run sums this rank's vector over the ranks and checks the sum; rank 0
// prints it on out.
func run(ctx context.Context, rt *runtimeview.RuntimeView, out io.Writer) error {
	// Rank r contributes [r, 2r, 3r, 4r].
	r := float64(rt.Rank())
	mine := []float64{r, 2 * r, 3 * r, 4 * r}
	sum, err := runtimeview.AllReduce(ctx, rt, mine, comm.Sum)
	if err != nil {
		return err
	}
	// Every rank checks against the closed form: sum of r over ranks
	// is n(n-1)/2.
	n := float64(rt.Size())
	base := n * (n - 1) / 2
	for i, v := range sum {
		if want := float64(i+1) * base; v != want {
			return fmt.Errorf("rank %d: element %d is %g, want %g", rt.Rank(), i, v, want)
		}
	}
	if rt.Rank() == 0 {
		fmt.Fprintf(out, "allreduce over %s (%s backend): %v\n", ranks(rt.Size()), rt.Backend(), sum)
	}
	return nil
}

// ranks is "1 rank" or "n ranks".
func ranks(n int) string {
	if n == 1 {
		return "1 rank"
	}
	return fmt.Sprintf("%d ranks", n)
}
