// Command heat runs a 1D heat diffusion as one task graph over every rank:
// the rod is cut into segments owned block-wise by the ranks, each step
// updates a segment from its neighbours' boundary values, and the
// distributed scheduler moves exactly the segments a step reads from
// another rank. Rank 0 gathers the rod and checks it against the same
// steps computed sequentially, bit for bit.
//
//	PZ_RANKS=4 go run ./examples/heat                 # 4 in-process ranks
//	go build -tags mpi -o /tmp/heat ./examples/heat && mpirun -n 4 --oversubscribe /tmp/heat
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"slices"

	"github.com/pzgo/pz/examples/internal/cli"

	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

const (
	segments = 16  // of the rod
	cells    = 256 // per segment
	steps    = 40
	alpha    = 0.25
)

// initial is the starting temperature of cell i of the rod: a hot middle.
func initial(i int) float64 {
	if i >= segments*cells/3 && i < 2*segments*cells/3 {
		return 100
	}
	return 0
}

// step computes next from cur and its neighbours' edge cells (left, right:
// nil at the rod's ends, which are held at 0).
func step(next, cur []float64, left, right []float64) {
	for i := range cur {
		l, r := 0.0, 0.0
		switch {
		case i > 0:
			l = cur[i-1]
		case left != nil:
			l = left[len(left)-1]
		}
		switch {
		case i < len(cur)-1:
			r = cur[i+1]
		case right != nil:
			r = right[0]
		}
		next[i] = cur[i] + alpha*(l-2*cur[i]+r)
	}
}

func main() {
	cli.Parse("heat", cli.NoArgs)
	err := runtimeview.Run(context.Background(), 0, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		return run(ctx, rt, os.Stdout)
	})
	if err != nil {
		log.Fatal(err)
	}
}

// run runs the steps over the ranks; rank 0 checks the rod against the
// sequential run and prints a line on out.
func run(ctx context.Context, rt *runtimeview.RuntimeView, out io.Writer) error {
	rod, sent, err := simulate(ctx, rt)
	if err != nil || rt.Rank() != 0 {
		return err
	}
	if !slices.Equal(rod, sequential()) {
		return fmt.Errorf("the distributed rod differs from the sequential one")
	}
	fmt.Fprintf(out, "heat: %d segments x %d steps over %s (%s backend): matches the sequential run; rank 0 sent %d segments\n",
		segments, steps, ranks(rt.Size()), rt.Backend(), sent)
	return nil
}

// simulate runs the steps as one task graph over the ranks and gathers
// the rod on rank 0. It returns the rod (nil on the other ranks) and the
// number of segments this rank sent.
func simulate(ctx context.Context, rt *runtimeview.RuntimeView) (rod []float64, sent int64, err error) {
	d, err := rt.Scheduler(ctx)
	if err != nil {
		return nil, 0, err
	}
	owner := func(s int) int { return s * rt.Size() / segments } // block distribution
	// Two generations of segments: cur and next swap every step.
	var gen [2][]*dist.Handle
	for g := range gen {
		gen[g] = make([]*dist.Handle, segments)
		for s := range segments {
			var data []float64
			if owner(s) == rt.Rank() {
				data = make([]float64, cells)
				for i := range data {
					data[i] = initial(s*cells + i)
				}
			}
			if gen[g][s], err = dist.Register(d, owner(s), data, cells, 1, scheduler.Named(fmt.Sprintf("seg%d/%d", s, g))); err != nil {
				return nil, 0, err
			}
		}
	}
	update := &scheduler.Codelet{Name: "heat_step", CPU: func(c *scheduler.Call) error {
		var left, right []float64
		k := 2
		if c.Arg.(int) > 0 {
			left = scheduler.VectorOf[float64](c, k)
			k++
		}
		if c.Arg.(int) < segments-1 {
			right = scheduler.VectorOf[float64](c, k)
		}
		step(scheduler.VectorOf[float64](c, 0), scheduler.VectorOf[float64](c, 1), left, right)
		return nil
	}}
	for t := range steps {
		cur, next := gen[t%2], gen[(t+1)%2]
		for s := range segments {
			args := []dist.Arg{dist.W(next[s]), dist.R(cur[s]), dist.With(scheduler.WithArg(s))}
			if s > 0 {
				args = append(args, dist.R(cur[s-1]))
			}
			if s < segments-1 {
				args = append(args, dist.R(cur[s+1]))
			}
			if err := d.Submit(ctx, update, args...); err != nil {
				return nil, 0, err
			}
		}
	}
	if rt.Rank() == 0 {
		rod = make([]float64, segments*cells)
	}
	// use runs on rank 0 only.
	if err := d.Gather(ctx, 0, gen[steps%2], func(s int, data any) error {
		copy(rod[s*cells:], data.([]float64))
		return nil
	}); err != nil {
		return nil, 0, err
	}
	return rod, d.Stats().MessagesSent, nil
}

// sequential runs the same steps on one rod and returns it.
func sequential() []float64 {
	cur, next := make([]float64, segments*cells), make([]float64, segments*cells)
	for i := range cur {
		cur[i] = initial(i)
	}
	for range steps {
		step(next, cur, nil, nil)
		cur, next = next, cur
	}
	return cur
}

// ranks is "1 rank" or "n ranks".
func ranks(n int) string {
	if n == 1 {
		return "1 rank"
	}
	return fmt.Sprintf("%d ranks", n)
}
