// Command heat2d solves the 2D heat equation with an explicit 5-point
// stencil as one task graph over every rank, StarPU-MPI style: the N x N
// plate is cut into tiles distributed 2D block-cyclic over the ranks
// (dist.BlockCyclic2D on dist.Grid), and each time step is one task per
// tile. Beside each tile, its first and last rows and columns are handles
// of their own (halos), written by the tile's task, so that a neighbour
// on another rank receives one row or column, not the whole tile. Every
// -every steps the tasks also write each tile's largest change; the
// ranks wait for the graph, take the maximum over their tiles and agree
// on the plate's through an all-reduce (or, with -redux, the tasks
// reduce it into one handle that every rank reads), and stop once it is
// below -tol: every rank makes the same decision, so every rank submits
// the same graph. Rank 0 gathers the plate and checks it bit for bit
// against the same arithmetic run sequentially, and prints both times.
//
//	PZ_RANKS=4 go run ./examples/heat2d                          # 4 in-process ranks, a 2 x 2 grid
//	PZ_RANKS=3 go run ./examples/heat2d -n 500 -b 64 -redux      # tiles that do not divide the plate
//	go build -tags mpi -o /tmp/heat2d ./examples/heat2d && mpirun -n 3 --oversubscribe /tmp/heat2d
//
// See docs/distributed.md, "a 2D heat equation to convergence".
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"slices"
	"time"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/examples/internal/cli"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// config is the problem: an n x n plate in tiles of at most b x b, held
// at 0 on three sides and at hot on the top one, starting at 0.
type config struct {
	n, b   int
	steps  int     // at most
	every  int     // steps between convergence checks
	tol    float64 // stop when no cell changed by more than this in a step
	alpha  float64 // diffusion number, at most 0.25 for stability
	hot    float64 // the top boundary's temperature
	redux  bool    // check through a Redux and Fetch, not WaitAll and AllReduce
	timing bool    // print the times
}

func defaultConfig() config {
	return config{n: 256, b: 64, steps: 2000, every: 50, tol: 0.02, alpha: 0.2, hot: 100}
}

// update is the stencil on one cell: c its value, the others its
// neighbours'. The explicit conversion rounds the product before the
// addition, so that no compiler fuses them into one FMA in one build of
// this function and not in another: the tiled and sequential runs must
// do the same arithmetic for the plates to match bit for bit.
func update(alpha, c, n, s, w, e float64) float64 {
	return c + float64(alpha*(n+s+w+e-4*c))
}

// result is what a run computed.
type result struct {
	plate   []float64 // n x n row-major: on rank 0 only for the tiled run
	steps   int       // steps taken
	changes []float64 // the largest change of each check, in order
	elapsed time.Duration
	sent    int64 // messages this rank sent (tiled run)
}

func main() {
	c := defaultConfig()
	flag.IntVar(&c.n, "n", c.n, "the plate is `n` x n cells")
	flag.IntVar(&c.b, "b", c.b, "tiles of at most `b` x b cells")
	flag.IntVar(&c.steps, "steps", c.steps, "at most this many time steps")
	flag.IntVar(&c.every, "every", c.every, "check convergence every `k` steps")
	flag.Float64Var(&c.tol, "tol", c.tol, "stop when no cell changes by more than this in a step")
	flag.Float64Var(&c.alpha, "alpha", c.alpha, "diffusion number (stable up to 0.25)")
	flag.BoolVar(&c.redux, "redux", c.redux, "check convergence through a Redux into one handle read on every rank (Fetch), not WaitAll and an AllReduce")
	cli.Parse("heat2d", cli.NoArgs)
	c.timing = true
	err := runtimeview.Run(context.Background(), 0, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		return run(ctx, rt, c, os.Stdout)
	})
	if err != nil {
		log.Fatal(err)
	}
}

// run solves on every rank; rank 0 checks the plate against the
// sequential solver and prints a line on out.
func run(ctx context.Context, rt *runtimeview.RuntimeView, c config, out io.Writer) error {
	if err := c.check(); err != nil {
		return err
	}
	got, err := tiled(ctx, rt, c)
	if err != nil || rt.Rank() != 0 {
		return err
	}
	want := sequential(c)
	if got.steps != want.steps || !slices.Equal(got.changes, want.changes) {
		return fmt.Errorf("heat2d: the tiled run stopped after %d steps with changes %v, the sequential one after %d with %v",
			got.steps, got.changes, want.steps, want.changes)
	}
	if i := firstDiff(got.plate, want.plate); i >= 0 {
		return fmt.Errorf("heat2d: cell (%d, %d) is %v in the tiled run, %v in the sequential one",
			i/c.n, i%c.n, got.plate[i], want.plate[i])
	}
	mt := (c.n + c.b - 1) / c.b
	p, q := dist.Grid(rt.Size())
	fmt.Fprintf(out, "heat2d: %d x %d cells in %d x %d tiles over %s (%d x %d grid, %s backend): %d steps, last change %.3g: matches the sequential run; rank 0 sent %d messages\n",
		c.n, c.n, mt, mt, ranks(rt.Size()), p, q, rt.Backend(), got.steps, got.changes[len(got.changes)-1], got.sent)
	if c.timing {
		fmt.Fprintf(out, "heat2d: tiled %.3f s (%.1f ns/cell-step), sequential %.3f s (%.1f ns/cell-step): %.2fx\n",
			got.elapsed.Seconds(), perCell(got.elapsed, c.n, got.steps), want.elapsed.Seconds(), perCell(want.elapsed, c.n, want.steps),
			want.elapsed.Seconds()/got.elapsed.Seconds())
	}
	return nil
}

func (c config) check() error {
	switch {
	case c.n < 1 || c.b < 1 || c.steps < 1 || c.every < 1:
		return fmt.Errorf("heat2d: -n %d, -b %d, -steps %d and -every %d must be positive", c.n, c.b, c.steps, c.every)
	case c.alpha <= 0 || c.alpha > 0.25:
		return fmt.Errorf("heat2d: -alpha %v is outside (0, 0.25], where the explicit scheme is stable", c.alpha)
	}
	return nil
}

func perCell(d time.Duration, n, steps int) float64 {
	return float64(d.Nanoseconds()) / float64(n*n*steps)
}

func firstDiff(a, b []float64) int {
	for i := range a {
		if a[i] != b[i] || math.Signbit(a[i]) != math.Signbit(b[i]) {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// The halos of a tile, in the order of a task's arguments.
const (
	north = iota // its first row
	south        // its last row
	west         // its first column
	east         // its last column
)

// gen is one generation of the plate: the tiles and each tile's four
// halos, tiles[i][j] and halo[side][i][j] for the same (i, j) on the
// same rank.
type gen struct {
	tiles [][]*dist.Handle
	halo  [4][][]*dist.Handle
}

// stepArg tells a stencil task which neighbours the tile has (those
// on the plate's border have fewer) and whether it reports its change.
type stepArg struct {
	has    [4]bool // a neighbour to the north, south, west, east
	report bool    // write the tile's change (argument 5)
	redux  bool    // into a Redux of the plate's, not a W of the tile's
	alpha  float64
	hot    float64
}

// tiled solves on every rank as one task graph, gathers the plate on
// rank 0 and returns it there.
func tiled(ctx context.Context, rt *runtimeview.RuntimeView, c config) (result, error) {
	d, err := rt.Scheduler(ctx)
	if err != nil {
		return result{}, err
	}
	// Every rank waits here, so that the time is the graph's alone.
	if err := rt.Barrier(ctx); err != nil {
		return result{}, err
	}
	start := time.Now()
	p, q := dist.Grid(d.Size())
	layout := dist.BlockCyclic2D(p, q)
	cl := newCodelets()
	mt := (c.n + c.b - 1) / c.b

	var g [2]gen
	for k := range g {
		name := fmt.Sprint("T", k)
		// The plate starts at 0, so the halos of generation 0 are zero as
		// the tiles are; a plate that starts otherwise fills both alike.
		if g[k].tiles, err = dist.RegisterMatrixTiles[float64](d, c.n, c.n, c.b, c.b, layout, nil, scheduler.Named(name)); err != nil {
			return result{}, err
		}
		// A row halo of every tile is a tile of an mt x n matrix cut in
		// 1 x b tiles; a column halo of an n x mt matrix in b x 1 tiles:
		// the same tile grid, so the same distribution puts each halo on
		// its tile's owner.
		for side, s := range []string{"N", "S", "W", "E"} {
			r, cl, mb, nb := mt, c.n, 1, c.b
			if side == west || side == east {
				r, cl, mb, nb = c.n, mt, c.b, 1
			}
			if g[k].halo[side], err = dist.RegisterMatrixTiles[float64](d, r, cl, mb, nb, layout, nil, scheduler.Named(name+s)); err != nil {
				return result{}, err
			}
		}
	}
	// Each tile's largest change at a check, on the tile's owner.
	change, err := dist.RegisterTiles[float64](d, mt, mt, 1, 1, layout, nil, scheduler.Named("change"))
	if err != nil {
		return result{}, err
	}
	// Or (-redux) the plate's: one value on rank 0 that the tasks of a
	// check step reduce into with max.
	var mem []float64
	if d.Rank() == 0 {
		mem = make([]float64, 1)
	}
	plateChange, err := dist.Register(d, 0, mem, 1, 1, scheduler.Named("plate change"))
	if err != nil {
		return result{}, err
	}
	if err := plateChange.SetReduction(cl.zero, cl.maxOf); err != nil {
		return result{}, err
	}

	res := result{}
	for step := 0; step < c.steps; {
		cur, next := &g[step%2], &g[(step+1)%2]
		report := (step+1)%c.every == 0 || step+1 == c.steps
		if report && c.redux {
			// The reduction starts from 0 at every check.
			if err := d.Submit(ctx, cl.zero, dist.W(plateChange)); err != nil {
				return result{}, err
			}
		}
		for i := range mt {
			for j := range mt {
				a := stepArg{has: [4]bool{i > 0, i < mt-1, j > 0, j < mt-1}, report: report, redux: c.redux, alpha: c.alpha, hot: c.hot}
				args := make([]dist.Arg, 0, 12)
				args = append(args, dist.W(next.tiles[i][j]),
					dist.W(next.halo[north][i][j]), dist.W(next.halo[south][i][j]),
					dist.W(next.halo[west][i][j]), dist.W(next.halo[east][i][j]))
				switch {
				case report && c.redux:
					args = append(args, dist.Redux(plateChange))
				case report:
					args = append(args, dist.W(change[i][j]))
				}
				args = append(args, dist.R(cur.tiles[i][j]))
				// The neighbours' halos that face this tile.
				if a.has[north] {
					args = append(args, dist.R(cur.halo[south][i-1][j]))
				}
				if a.has[south] {
					args = append(args, dist.R(cur.halo[north][i+1][j]))
				}
				if a.has[west] {
					args = append(args, dist.R(cur.halo[east][i][j-1]))
				}
				if a.has[east] {
					args = append(args, dist.R(cur.halo[west][i][j+1]))
				}
				args = append(args, dist.With(scheduler.WithArg(a)))
				if err := d.Submit(ctx, cl.stencil, args...); err != nil {
					return result{}, err
				}
			}
		}
		step++
		if !report {
			continue
		}
		m, err := converged(ctx, rt, d, cl, change, plateChange, c.redux)
		if err != nil {
			return result{}, err
		}
		res.changes = append(res.changes, m)
		res.steps = step
		if m < c.tol {
			break
		}
	}
	if d.Rank() == 0 {
		res.plate = make([]float64, c.n*c.n)
	}
	if err := dist.GatherMatrix(ctx, d, 0, res.plate, c.n, c.n, g[res.steps%2].tiles); err != nil {
		return result{}, err
	}
	res.elapsed = time.Since(start)
	res.sent = d.Stats().MessagesSent
	return res, nil
}

// converged returns the plate's largest change in the last step, the
// same on every rank.
func converged(ctx context.Context, rt *runtimeview.RuntimeView, d *dist.Scheduler, cl codelets, change [][]*dist.Handle, plateChange *dist.Handle, redux bool) (float64, error) {
	if redux {
		// Every rank reads the reduced value in a task of its own, so
		// that it holds the latest version, and Fetch waits for it
		// there: for this value only, not for the whole graph.
		for r := range d.Size() {
			if err := d.Submit(ctx, cl.read, dist.R(plateChange), dist.OnRank(r)); err != nil {
				return 0, err
			}
		}
		v, err := plateChange.Fetch(ctx)
		if err != nil {
			return 0, err
		}
		return v.([]float64)[0], nil
	}
	// Every rank waits for the graph so far, takes the largest change
	// of the tiles it owns (their owners hold them after WaitAll) and the
	// ranks agree on the plate's.
	if err := d.WaitAll(ctx); err != nil {
		return 0, err
	}
	mine := 0.0
	for _, row := range change {
		for _, h := range row {
			if h.Owner() == d.Rank() {
				mine = max(mine, h.Data().([]float64)[0])
			}
		}
	}
	all, err := runtimeview.AllReduce(ctx, rt, []float64{mine}, comm.Max)
	if err != nil {
		return 0, err
	}
	return all[0], nil
}

// codelets are the tasks' kinds; every rank makes its own (a program
// keeps no package-level state: in-process ranks share the package).
type codelets struct{ stencil, zero, maxOf, read *scheduler.Codelet }

// newCodelets makes the codelets of one rank.
func newCodelets() codelets {
	return codelets{
		stencil: &scheduler.Codelet{Name: "stencil", CPU: stencil},
		zero: &scheduler.Codelet{Name: "zero", CPU: func(c *scheduler.Call) error {
			clear(scheduler.VectorOf[float64](c, 0))
			return nil
		}},
		maxOf: &scheduler.Codelet{Name: "max", CPU: func(c *scheduler.Call) error {
			a, b := scheduler.VectorOf[float64](c, 0), scheduler.VectorOf[float64](c, 1)
			a[0] = max(a[0], b[0])
			return nil
		}},
		read: &scheduler.Codelet{Name: "read", CPU: func(*scheduler.Call) error { return nil }},
	}
}

// stencil writes the next generation of a tile and its halos from the
// current tile and its neighbours' facing halos (and, when asked, the
// tile's largest change). Arguments: next tile, its north, south, west
// and east halos, [change], current tile, then the neighbours' halos
// that exist, north, south, west, east.
func stencil(call *scheduler.Call) error {
	a := call.Arg.(stepArg)
	rows, cols, _ := call.Dims(0)
	next := scheduler.VectorOf[float64](call, 0)
	k := 5
	var change []float64
	if a.report { // a W of the tile's change, or a Redux of the plate's
		change = scheduler.VectorOf[float64](call, k)
		k++
	}
	cur := scheduler.VectorOf[float64](call, k)
	k++
	var nb [4][]float64 // the neighbours' halos; nil at the plate's border
	for side := range nb {
		if a.has[side] {
			nb[side] = scheduler.VectorOf[float64](call, k)
			k++
		}
	}
	// Outside the plate: hot above, 0 on the other sides.
	at := func(side, idx int, border float64) float64 {
		if nb[side] == nil {
			return border
		}
		return nb[side][idx]
	}
	m := 0.0
	for r := range rows {
		for cc := range cols {
			v := cur[r*cols+cc]
			var n, s, w, e float64
			if r > 0 {
				n = cur[(r-1)*cols+cc]
			} else {
				n = at(north, cc, a.hot)
			}
			if r < rows-1 {
				s = cur[(r+1)*cols+cc]
			} else {
				s = at(south, cc, 0)
			}
			if cc > 0 {
				w = cur[r*cols+cc-1]
			} else {
				w = at(west, r, 0)
			}
			if cc < cols-1 {
				e = cur[r*cols+cc+1]
			} else {
				e = at(east, r, 0)
			}
			u := update(a.alpha, v, n, s, w, e)
			next[r*cols+cc] = u
			if dv := math.Abs(u - v); dv > m {
				m = dv
			}
		}
	}
	copy(scheduler.VectorOf[float64](call, 1), next[:cols])
	copy(scheduler.VectorOf[float64](call, 2), next[(rows-1)*cols:])
	wc, ec := scheduler.VectorOf[float64](call, 3), scheduler.VectorOf[float64](call, 4)
	for r := range rows {
		wc[r] = next[r*cols]
		ec[r] = next[r*cols+cols-1]
	}
	switch {
	case a.redux && change != nil: // this worker's copy, from the identity
		change[0] = max(change[0], m)
	case change != nil:
		change[0] = m
	}
	return nil
}

// sequential runs the same steps and checks on one n x n plate.
func sequential(c config) result {
	start := time.Now()
	n := c.n
	cur, next := make([]float64, n*n), make([]float64, n*n)
	res := result{}
	for step := 0; step < c.steps; {
		m := 0.0
		for r := range n {
			for cc := range n {
				v := cur[r*n+cc]
				nv, s, w, e := c.hot, 0.0, 0.0, 0.0
				if r > 0 {
					nv = cur[(r-1)*n+cc]
				}
				if r < n-1 {
					s = cur[(r+1)*n+cc]
				}
				if cc > 0 {
					w = cur[r*n+cc-1]
				}
				if cc < n-1 {
					e = cur[r*n+cc+1]
				}
				u := update(c.alpha, v, nv, s, w, e)
				next[r*n+cc] = u
				if dv := math.Abs(u - v); dv > m {
					m = dv
				}
			}
		}
		cur, next = next, cur
		step++
		if step%c.every == 0 || step == c.steps {
			res.changes = append(res.changes, m)
			res.steps = step
			if m < c.tol {
				break
			}
		}
	}
	res.plate = cur
	res.elapsed = time.Since(start)
	return res
}

// ranks is "1 rank" or "n ranks".
func ranks(n int) string {
	if n == 1 {
		return "1 rank"
	}
	return fmt.Sprintf("%d ranks", n)
}
