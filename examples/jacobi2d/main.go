// Command jacobi2d runs a 2D Jacobi heat stencil as one task graph over
// every rank: the plate is cut into nt x nt tiles, each rank owns a
// contiguous block of them (a distribution function on the most square
// process grid), and each step computes a tile of the next generation
// from its tile and its four neighbours' of the current one, so the
// distributed scheduler moves exactly the tiles on the blocks' borders.
// Every few steps a Redux task per tile adds its squared change into a
// residual owned by rank 0. Rank 0 gathers the plate and checks it
// against the same steps computed sequentially, bit for bit, and the
// residuals within rounding (a reduction's order of additions varies).
//
//	PZ_RANKS=4 go run ./examples/jacobi2d                  # 4 in-process ranks, a 2 x 2 grid
//	go build -tags mpi -o /tmp/jacobi2d ./examples/jacobi2d && mpirun -n 4 --oversubscribe /tmp/jacobi2d
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"slices"

	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

var (
	nt    = flag.Int("nt", 6, "tiles per side of the plate")
	b     = flag.Int("b", 32, "cells per side of a tile")
	steps = flag.Int("steps", 30, "Jacobi steps")
	every = flag.Int("every", 10, "compute the residual every this many steps")
)

// initial is the starting temperature of cell (i, j) of an n x n plate:
// a hot rectangle on a faintly patterned background. The plate's
// surroundings are held at 0.
func initial(i, j, n int) float64 {
	if i > n/4 && i < 3*n/4 && j > n/3 && j < 2*n/3 {
		return 100
	}
	return float64((7*i+3*j)%11) / 10
}

// cell returns cell (i, j) of the b x b tile t, reaching into the
// neighbour tiles up, down, left and right (nil: outside the plate, 0)
// for the row or column just outside t.
func cell(t, up, down, left, right []float64, b, i, j int) float64 {
	var src []float64
	switch {
	case i < 0:
		src, i = up, b-1
	case i == b:
		src, i = down, 0
	case j < 0:
		src, j = left, b-1
	case j == b:
		src, j = right, 0
	default:
		src = t
	}
	if src == nil {
		return 0
	}
	return src[i*b+j]
}

// relax sets next to the average of each cell's four neighbours in cur.
func relax(next, cur, up, down, left, right []float64, b int) {
	for i := range b {
		for j := range b {
			next[i*b+j] = 0.25 * (cell(cur, up, down, left, right, b, i-1, j) +
				cell(cur, up, down, left, right, b, i+1, j) +
				cell(cur, up, down, left, right, b, i, j-1) +
				cell(cur, up, down, left, right, b, i, j+1))
		}
	}
}

// sides says which neighbour tiles a step task reads after its own (in
// this order): its Arg.
type sides struct{ up, down, left, right bool }

func main() {
	flag.Parse()
	if err := runtimeview.Run(context.Background(), 0, run); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, rt *runtimeview.RuntimeView) error {
	d, err := rt.Scheduler(ctx)
	if err != nil {
		return err
	}
	T, B, n := *nt, *b, *nt**b
	p, q := dist.Grid(rt.Size())
	if T < p || T < q {
		return fmt.Errorf("jacobi2d: %d x %d tiles do not cover a %d x %d process grid; raise -nt", T, T, p, q)
	}
	// Blocks, not block-cyclic: rank (r, c) of the P x Q grid owns tile
	// rows r*T/P.. and columns c*T/Q.., so only border tiles travel.
	blocks := dist.Func(func(i, j int) int { return (i*p/T)*q + j*q/T })
	fill := func(i, j int, tile []float64) {
		for ii := range B {
			for jj := range B {
				tile[ii*B+jj] = initial(i*B+ii, j*B+jj, n)
			}
		}
	}
	cur, err := dist.RegisterTiles(d, T, T, B, B, blocks, fill, scheduler.Named("A"))
	if err != nil {
		return err
	}
	next, err := dist.RegisterTiles[float64](d, T, T, B, B, blocks, nil, scheduler.Named("B"))
	if err != nil {
		return err
	}
	var resMem []float64
	if rt.Rank() == 0 {
		resMem = make([]float64, 1)
	}
	res, err := dist.Register(d, 0, resMem, 1, 1, scheduler.Named("residual"))
	if err != nil {
		return err
	}
	zero := &scheduler.Codelet{Name: "zero", CPU: func(c *scheduler.Call) error {
		scheduler.VectorOf[float64](c, 0)[0] = 0
		return nil
	}}
	add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
		scheduler.VectorOf[float64](c, 0)[0] += scheduler.VectorOf[float64](c, 1)[0]
		return nil
	}}
	if err := res.SetReduction(zero, add); err != nil {
		return err
	}
	step := &scheduler.Codelet{Name: "jacobi", CPU: func(c *scheduler.Call) error {
		s := c.Arg.(sides)
		k := 1
		neighbour := func(present bool) []float64 {
			if !present {
				return nil
			}
			k++
			return scheduler.VectorOf[float64](c, k)
		}
		up, down, left, right := neighbour(s.up), neighbour(s.down), neighbour(s.left), neighbour(s.right)
		relax(scheduler.VectorOf[float64](c, 0), scheduler.VectorOf[float64](c, 1), up, down, left, right, B)
		return nil
	}}
	change := &scheduler.Codelet{Name: "change", CPU: func(c *scheduler.Call) error {
		x, y := scheduler.VectorOf[float64](c, 0), scheduler.VectorOf[float64](c, 1)
		sum := 0.0
		for k := range x {
			sum += (y[k] - x[k]) * (y[k] - x[k])
		}
		scheduler.VectorOf[float64](c, 2)[0] += sum
		return nil
	}}
	var residuals []float64
	for s := range *steps {
		for i := range T {
			for j := range T {
				side := sides{up: i > 0, down: i < T-1, left: j > 0, right: j < T-1}
				args := []dist.Arg{dist.W(next[i][j]), dist.R(cur[i][j]), dist.With(scheduler.WithArg(side))}
				if side.up {
					args = append(args, dist.R(cur[i-1][j]))
				}
				if side.down {
					args = append(args, dist.R(cur[i+1][j]))
				}
				if side.left {
					args = append(args, dist.R(cur[i][j-1]))
				}
				if side.right {
					args = append(args, dist.R(cur[i][j+1]))
				}
				if err := d.Submit(ctx, step, args...); err != nil {
					return err
				}
			}
		}
		if (s+1)%*every == 0 {
			// res = sum over tiles of |next - cur|^2: each tile's task
			// runs on its owner and adds into that rank's partial sum.
			if err := d.Submit(ctx, zero, dist.W(res)); err != nil {
				return err
			}
			for i := range T {
				for j := range T {
					if err := d.Submit(ctx, change, dist.R(cur[i][j]), dist.R(next[i][j]), dist.Redux(res)); err != nil {
						return err
					}
				}
			}
			if err := d.WaitAll(ctx); err != nil { // the partial sums are combined on rank 0
				return err
			}
			if rt.Rank() == 0 {
				residuals = append(residuals, res.Data().([]float64)[0])
			}
		}
		cur, next = next, cur
	}
	var plate []float64
	if rt.Rank() == 0 {
		plate = make([]float64, n*n)
	}
	if err := dist.GatherMatrix(ctx, d, 0, plate, n, cur); err != nil { // ends with WaitAll
		return err
	}
	if rt.Rank() != 0 {
		return nil
	}
	want, wantRes := sequential(n, *steps, *every)
	if !slices.Equal(plate, want) {
		return fmt.Errorf("jacobi2d: the distributed plate differs from the sequential one")
	}
	for k := range wantRes {
		if math.Abs(residuals[k]-wantRes[k]) > 1e-12*wantRes[k] {
			return fmt.Errorf("jacobi2d: residual after step %d: %g, sequentially %g", (k+1)**every, residuals[k], wantRes[k])
		}
	}
	fmt.Printf("jacobi2d: %d x %d cells in %d x %d tiles, %d steps over %d ranks (%d x %d grid, %s backend): matches the sequential run; residuals %.6g; rank 0 sent %d tiles\n",
		n, n, T, T, *steps, rt.Size(), p, q, rt.Backend(), residuals, d.Stats().MessagesSent)
	return nil
}

// sequential runs the same steps on the whole plate and returns it and
// the residual every few steps.
func sequential(n, steps, every int) (plate, residuals []float64) {
	cur, next := make([]float64, n*n), make([]float64, n*n)
	for i := range n {
		for j := range n {
			cur[i*n+j] = initial(i, j, n)
		}
	}
	for s := range steps {
		relax(next, cur, nil, nil, nil, nil, n)
		if (s+1)%every == 0 {
			sum := 0.0
			for k := range cur {
				sum += (next[k] - cur[k]) * (next[k] - cur[k])
			}
			residuals = append(residuals, sum)
		}
		cur, next = next, cur
	}
	return cur, residuals
}
