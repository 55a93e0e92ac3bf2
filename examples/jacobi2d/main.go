// Command jacobi2d runs a 2D Jacobi heat stencil as one task graph over
// every rank: the rectangular plate is cut into mt x nt tiles (mt rows
// of tiles, nt columns; 4 x 6 by default), each rank owns a
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
	mt    = flag.Int("mt", 4, "rows of tiles of the plate")
	nt    = flag.Int("nt", 6, "columns of tiles of the plate")
	b     = flag.Int("b", 32, "cells per side of a tile")
	steps = flag.Int("steps", 30, "Jacobi steps")
	every = flag.Int("every", 10, "compute the residual every this many steps")
)

// initial is the starting temperature of cell (i, j) of a rows x cols
// plate: a hot rectangle on a faintly patterned background. The plate's
// surroundings are held at 0.
func initial(i, j, rows, cols int) float64 {
	if i > rows/4 && i < 3*rows/4 && j > cols/3 && j < 2*cols/3 {
		return 100
	}
	return float64((7*i+3*j)%11) / 10
}

// cell returns cell (i, j) of the rows x cols tile t, reaching into the
// neighbour tiles up, down, left and right (nil: outside the plate, 0;
// of t's shape otherwise) for the row or column just outside t.
func cell(t, up, down, left, right []float64, rows, cols, i, j int) float64 {
	var src []float64
	switch {
	case i < 0:
		src, i = up, rows-1
	case i == rows:
		src, i = down, 0
	case j < 0:
		src, j = left, cols-1
	case j == cols:
		src, j = right, 0
	default:
		src = t
	}
	if src == nil {
		return 0
	}
	return src[i*cols+j]
}

// relax sets next to the average of each cell's four neighbours in cur,
// a rows x cols tile (or the whole plate, with no neighbours).
func relax(next, cur, up, down, left, right []float64, rows, cols int) {
	for i := range rows {
		for j := range cols {
			next[i*cols+j] = 0.25 * (cell(cur, up, down, left, right, rows, cols, i-1, j) +
				cell(cur, up, down, left, right, rows, cols, i+1, j) +
				cell(cur, up, down, left, right, rows, cols, i, j-1) +
				cell(cur, up, down, left, right, rows, cols, i, j+1))
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
	MT, NT, B := *mt, *nt, *b
	rows, cols := MT*B, NT*B
	p, q := dist.Grid(rt.Size())
	if MT < p || NT < q {
		return fmt.Errorf("jacobi2d: %d x %d tiles do not cover a %d x %d process grid; raise -mt or -nt", MT, NT, p, q)
	}
	// Blocks, not block-cyclic: rank (r, c) of the P x Q grid owns tile
	// rows r*MT/P.. and columns c*NT/Q.., so only border tiles travel.
	blocks := dist.Func(func(i, j int) int { return (i*p/MT)*q + j*q/NT })
	fill := func(i, j int, tile []float64) {
		for ii := range B {
			for jj := range B {
				tile[ii*B+jj] = initial(i*B+ii, j*B+jj, rows, cols)
			}
		}
	}
	cur, err := dist.RegisterTiles(d, MT, NT, B, B, blocks, fill, scheduler.Named("A"))
	if err != nil {
		return err
	}
	next, err := dist.RegisterTiles[float64](d, MT, NT, B, B, blocks, nil, scheduler.Named("B"))
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
		relax(scheduler.VectorOf[float64](c, 0), scheduler.VectorOf[float64](c, 1), up, down, left, right, B, B)
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
		for i := range MT {
			for j := range NT {
				side := sides{up: i > 0, down: i < MT-1, left: j > 0, right: j < NT-1}
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
			for i := range MT {
				for j := range NT {
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
		plate = make([]float64, rows*cols)
	}
	if err := dist.GatherMatrix(ctx, d, 0, plate, rows, cols, cur); err != nil { // ends with WaitAll
		return err
	}
	if rt.Rank() != 0 {
		return nil
	}
	want, wantRes := sequential(rows, cols, *steps, *every)
	if !slices.Equal(plate, want) {
		return fmt.Errorf("jacobi2d: the distributed plate differs from the sequential one")
	}
	for k := range wantRes {
		if math.Abs(residuals[k]-wantRes[k]) > 1e-12*wantRes[k] {
			return fmt.Errorf("jacobi2d: residual after step %d: %g, sequentially %g", (k+1)**every, residuals[k], wantRes[k])
		}
	}
	fmt.Printf("jacobi2d: %d x %d cells in %d x %d tiles, %d steps over %d ranks (%d x %d grid, %s backend): matches the sequential run; residuals %.6g; rank 0 sent %d tiles\n",
		rows, cols, MT, NT, *steps, rt.Size(), p, q, rt.Backend(), residuals, d.Stats().MessagesSent)
	return nil
}

// sequential runs the same steps on the whole rows x cols plate and
// returns it and the residual every few steps.
func sequential(rows, cols, steps, every int) (plate, residuals []float64) {
	cur, next := make([]float64, rows*cols), make([]float64, rows*cols)
	for i := range rows {
		for j := range cols {
			cur[i*cols+j] = initial(i, j, rows, cols)
		}
	}
	for s := range steps {
		relax(next, cur, nil, nil, nil, nil, rows, cols)
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
