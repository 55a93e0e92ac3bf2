// Command leibniz computes π from the Leibniz series with many small
// tasks, submitted by each rank's main goroutine through a scheduler
// Driver, so that the goroutine that submits is one of the rank's
// workers: once enough tasks are in flight, Submit runs them itself
// instead of queueing them (see docs/scheduler.md, "The submitter as a
// worker"). Each worker keeps its own partial sum, indexed by the id the
// task's call gives it; the ranks then add their sums with AllReduce and
// every rank checks the result.
//
//	PZ_RANKS=4 go run ./examples/leibniz
//	go build -tags mpi -o /tmp/leibniz ./examples/leibniz && mpirun -n 2 --oversubscribe /tmp/leibniz
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"os"

	"github.com/pzgo/pz/examples/internal/cli"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler"
)

const (
	terms = 1 << 26 // of the series, over all ranks
	chunk = 4096    // terms per task (a few µs)
	pad   = 8       // float64s between two workers' sums (a cache line)
)

func main() {
	cli.Parse("leibniz", cli.NoArgs)
	err := runtimeview.Run(context.Background(), 0, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		return run(ctx, rt, terms, os.Stdout)
	})
	if err != nil {
		log.Fatal(err)
	}
}

// run sums the first n terms of the series over the ranks; the root
// rank logs π and every rank prints its tasks on out.
func run(ctx context.Context, rt *runtimeview.RuntimeView, n int, out io.Writer) error {
	return runHooked(ctx, rt, n, out, nil)
}

// runHooked is run, calling ran (unless nil) after each task has added
// its terms, on the goroutine that ran it: tests wait on it for the
// computation to have started.
func runHooked(ctx context.Context, rt *runtimeview.RuntimeView, n int, out io.Writer, ran func()) error {
	ds, err := rt.Scheduler(ctx, scheduler.WithDrivenWorkers(1)) // closed by rt.Close
	if err != nil {
		return err
	}
	s := ds.Local()
	workers := len(s.Workers())
	d, err := s.Driver(workers - 1) // the driven worker: this goroutine
	if err != nil {
		return err
	}
	if err := d.Init(); err != nil {
		return err
	}
	sums := make([]float64, workers*pad)
	var bySubmitter int
	term := &scheduler.Codelet{Name: "terms", CPU: func(c *scheduler.Call) error {
		first := c.Arg.(int)
		x := 0.0
		for i := first; i < min(first+chunk, n); i++ {
			x += (1 - 2*float64(i&1)) / float64(2*i+1)
		}
		sums[c.Worker*pad] += x
		if c.Worker == d.Worker() {
			bySubmitter++ // only this goroutine runs the driven worker's tasks
		}
		if ran != nil {
			ran()
		}
		return nil
	}}
	tasks, err := submit(ctx, d, term, rt, n)
	if err != nil {
		// Interrupted (ctx ended) or failed: tasks already submitted are
		// still queued, some for the driven worker, which nothing but
		// this goroutine runs; rt.Close would wait for them forever.
		// Run them before leaving: they are few, as Submit runs tasks
		// itself once more than its limit are in flight.
		if werr := d.WaitAll(context.WithoutCancel(ctx)); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	if derr := d.Deinit(); derr != nil {
		err = errors.Join(err, derr)
	}
	if err != nil {
		return err
	}
	mine := 0.0
	for w := range workers {
		mine += sums[w*pad]
	}
	total, err := runtimeview.AllReduce(ctx, rt, []float64{mine}, comm.Sum)
	if err != nil {
		return err
	}
	pi := 4 * total[0]
	// Four times the series' error after n terms is about 1/n.
	if e := math.Abs(pi - math.Pi); e > 2.0/float64(n) {
		return fmt.Errorf("rank %d: π ≈ %.12f, off by %.2g", rt.Rank(), pi, e)
	}
	rt.Logger().Info(fmt.Sprintf("π ≈ %.10f from %d terms over %s (%s backend)", pi, n, count(rt.Size(), "rank"), rt.Backend()))
	fmt.Fprintf(out, "rank %d: %s, %s, %d run by the submitting goroutine\n", rt.Rank(), count(tasks, "task"), count(workers, "worker"), bySubmitter)
	return nil
}

// submit submits this rank's share of the n terms, chunk by chunk, and
// waits for them, running tasks on d's worker meanwhile. It returns the
// number of tasks submitted.
func submit(ctx context.Context, d *scheduler.Driver, term *scheduler.Codelet, rt *runtimeview.RuntimeView, n int) (int, error) {
	tasks := 0
	for first := rt.Rank() * chunk; first < n; first += rt.Size() * chunk {
		if err := d.Submit(ctx, term, scheduler.WithArg(first)); err != nil {
			return tasks, err
		}
		tasks++
	}
	if err := d.WaitAll(ctx); err != nil { // runs this worker's tasks while waiting
		return tasks, err
	}
	return tasks, nil
}

// count is "1 thing" or "n things".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
