// Command jacobi2d runs a 2D Jacobi heat stencil as one task graph over
// every rank: the rectangular plate of -rows x -cols cells (128 x 192 by
// default) is cut into tiles of at most -b x -b cells as ScaLAPACK cuts
// a matrix (dist.RegisterMatrixTiles: where b does not divide the plate,
// the last row and column of tiles are smaller), each rank owns a
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
//	PZ_RANKS=4 go run ./examples/jacobi2d -rows 100 -cols 150  # 4 x 5 tiles, the last row 4 cells high, the last column 22 wide
//	go build -tags mpi -o /tmp/jacobi2d ./examples/jacobi2d && mpirun -n 4 --oversubscribe /tmp/jacobi2d
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"slices"

	"github.com/pzgo/pz/examples/internal/cli"

	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// config is the run's flags.
type config struct {
	rows, cols, b, steps, every int
}

// defaultConfig is the flags' defaults.
func defaultConfig() config { return config{rows: 128, cols: 192, b: 32, steps: 30, every: 10} }

// initial is the starting temperature of cell (i, j) of a rows x cols
// plate: a hot rectangle on a faintly patterned background. The plate's
// surroundings are held at 0.
func initial(i, j, rows, cols int) float64 {
	if i > rows/4 && i < 3*rows/4 && j > cols/3 && j < 2*cols/3 {
		return 100
	}
	return float64((7*i+3*j)%11) / 10
}

// A tile is rows x cols cells, row-major; no cells (nil) stand for the
// outside of the plate. Tiles differ in shape where b does not divide the
// plate: a tile and its neighbours above and below are as wide, and it
// and its neighbours left and right as high.
type tile struct {
	cells      []float64
	rows, cols int
}

// cell returns cell (i, j) of t, reaching into the neighbour tiles up,
// down, left and right for the row or column just outside t (0 outside
// the plate).
func cell(t, up, down, left, right tile, i, j int) float64 {
	src := t
	switch {
	case i < 0:
		src, i = up, up.rows-1
	case i == t.rows:
		src, i = down, 0
	case j < 0:
		src, j = left, left.cols-1
	case j == t.cols:
		src, j = right, 0
	}
	if src.cells == nil {
		return 0
	}
	return src.cells[i*src.cols+j]
}

// relax sets next, of cur's shape, to the average of each cell's four
// neighbours in cur (a tile, or the whole plate with no neighbours).
func relax(next []float64, cur, up, down, left, right tile) {
	for i := range cur.rows {
		for j := range cur.cols {
			next[i*cur.cols+j] = 0.25 * (cell(cur, up, down, left, right, i-1, j) +
				cell(cur, up, down, left, right, i+1, j) +
				cell(cur, up, down, left, right, i, j-1) +
				cell(cur, up, down, left, right, i, j+1))
		}
	}
}

// sides says which neighbour tiles a step task reads after its own (in
// this order): its Arg.
type sides struct{ up, down, left, right bool }

func main() {
	c := defaultConfig()
	flag.IntVar(&c.rows, "rows", c.rows, "rows of cells of the plate")
	flag.IntVar(&c.cols, "cols", c.cols, "columns of cells of the plate")
	flag.IntVar(&c.b, "b", c.b, "cells per side of a tile, at most (the last row and column of tiles hold the cells left)")
	flag.IntVar(&c.steps, "steps", c.steps, "Jacobi steps")
	flag.IntVar(&c.every, "every", c.every, "compute the residual every this many steps")
	cli.Parse("jacobi2d", "it takes only the flags -rows, -cols, -b, -steps and -every")
	if err := checkFlags(c.rows, c.cols, c.b, c.steps, c.every); err != nil {
		fmt.Fprintln(os.Stderr, "jacobi2d:", err)
		os.Exit(2)
	}
	if err := runtimeview.Run(context.Background(), 0, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		return run(ctx, rt, c)
	}); err != nil {
		log.Fatal(err)
	}
}

// checkFlags rejects sizes below 1, a negative number of steps and a
// residual period below 1.
func checkFlags(rows, cols, b, steps, every int) error {
	if rows < 1 || cols < 1 || b < 1 {
		return fmt.Errorf("a %d x %d plate in tiles of %d x %d: -rows, -cols and -b must be at least 1", rows, cols, b, b)
	}
	if steps < 0 {
		return fmt.Errorf("-steps %d: want 0 or more", steps)
	}
	if every < 1 {
		return fmt.Errorf("-every %d: want at least 1 (the residual every this many steps)", every)
	}
	return nil
}

func run(ctx context.Context, rt *runtimeview.RuntimeView, c config) error {
	d, err := rt.Scheduler(ctx)
	if err != nil {
		return err
	}
	rows, cols, B := c.rows, c.cols, c.b // checked by checkFlags
	MT, NT := (rows+B-1)/B, (cols+B-1)/B // the grid RegisterMatrixTiles makes
	p, q := dist.Grid(rt.Size())
	if MT < p || NT < q {
		return fmt.Errorf("jacobi2d: %d x %d tiles do not cover a %d x %d process grid; raise -rows or -cols, or lower -b", MT, NT, p, q)
	}
	// Blocks, not block-cyclic: rank (r, c) of the P x Q grid owns tile
	// rows r*MT/P.. and columns c*NT/Q.., so only border tiles travel.
	blocks := dist.Func(func(i, j int) int { return (i*p/MT)*q + j*q/NT })
	// Tile (i, j) is h x w cells from cell (i*B, j*B) of the plate.
	fill := func(i, j, h, w int, t []float64) {
		for ii := range h {
			for jj := range w {
				t[ii*w+jj] = initial(i*B+ii, j*B+jj, rows, cols)
			}
		}
	}
	cur, err := dist.RegisterMatrixTiles(d, rows, cols, B, B, blocks, fill, scheduler.Named("A"))
	if err != nil {
		return err
	}
	next, err := dist.RegisterMatrixTiles[float64](d, rows, cols, B, B, blocks, nil, scheduler.Named("B"))
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
		// Each tile's shape is its handle's (Dims): the edge tiles'
		// are smaller.
		at := func(k int) tile {
			r, w, _ := c.Dims(k)
			return tile{scheduler.VectorOf[float64](c, k), r, w}
		}
		k := 1
		neighbour := func(present bool) tile {
			if !present {
				return tile{}
			}
			k++
			return at(k)
		}
		up, down, left, right := neighbour(s.up), neighbour(s.down), neighbour(s.left), neighbour(s.right)
		relax(scheduler.VectorOf[float64](c, 0), at(1), up, down, left, right)
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
	for s := range c.steps {
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
		if (s+1)%c.every == 0 {
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
	want, wantRes := sequential(rows, cols, c.steps, c.every)
	if !slices.Equal(plate, want) {
		return fmt.Errorf("jacobi2d: the distributed plate differs from the sequential one")
	}
	for k := range wantRes {
		if math.Abs(residuals[k]-wantRes[k]) > 1e-12*wantRes[k] {
			return fmt.Errorf("jacobi2d: residual after step %d: %g, sequentially %g", (k+1)*c.every, residuals[k], wantRes[k])
		}
	}
	fmt.Printf("jacobi2d: %d x %d cells in %d x %d tiles, %d steps over %s (%d x %d grid, %s backend): matches the sequential run; residuals %.6g; rank 0 sent %d tiles\n",
		rows, cols, MT, NT, c.steps, ranks(rt.Size()), p, q, rt.Backend(), residuals, d.Stats().MessagesSent)
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
		relax(next, tile{cur, rows, cols}, tile{}, tile{}, tile{}, tile{})
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

// ranks is "1 rank" or "n ranks".
func ranks(n int) string {
	if n == 1 {
		return "1 rank"
	}
	return fmt.Sprintf("%d ranks", n)
}
