// Command sweep is a parameter sweep spread over a cluster in
// master/worker mode (rt.RunMaster): rank 0 alone runs a sequentially
// written program that submits one task per row of a grid of parameters,
// and the cores of every other rank serve as workers of rank 0's
// scheduler. Each task computes, for one row of the grid, the Lyapunov
// exponent of the logistic map x -> r x (1 - x) whose rate r alternates
// between a and b after a pattern such as "AB" (the Markus-Lyapunov
// fractal): thousands of iterations per point, a row of numbers back,
// compute-heavy on little data. A last task reads every row, in order,
// and reduces them into a summary (the share of chaotic points, the
// mean exponent, the most stable and the most chaotic point), so the
// summary does not depend on which rank ran which row. Rank 0 checks the
// exponents and the summary bit for bit against the same sweep run
// sequentially, and prints the summary and how many tasks each rank ran.
//
//	go run ./examples/sweep                                    # 1 rank (PZ_RANKS=N for N in-process ranks)
//	PZ_RANKS=4 go run ./examples/sweep -rows 256 -cols 256     # rank 0 submits; ranks 1-3 serve
//	go build -tags mpi -o /tmp/sweep ./examples/sweep && mpirun -n 2 --oversubscribe /tmp/sweep
//
// See docs/distributed.md, "Master/worker mode".
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
	"strings"
	"sync/atomic"
	"time"

	"github.com/pzgo/pz/examples/internal/cli"
	"github.com/pzgo/pz/internal/progress"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// config is the sweep: a rows x cols grid of rates, a over the rows from
// amin to amax and b over the columns from bmin to bmax.
type config struct {
	rows, cols int
	amin, amax float64
	bmin, bmax float64
	pattern    string // of 'A' and 'B': the rate of iteration n is a or b after pattern[n mod len]
	warmup     int    // iterations dropped before the exponent is measured
	iters      int    // iterations the exponent averages over
	timing     bool   // print the times
	// beforeRow, if set, is called by every row task with the rank that
	// runs it, before the row: TestRanks holds the master's row tasks
	// there until a worker rank has started one (nil in the program).
	beforeRow func(rank int)
}

func defaultConfig() config {
	return config{rows: 128, cols: 128, amin: 2.5, amax: 4, bmin: 2.5, bmax: 4, pattern: "AB", warmup: 200, iters: 2000}
}

// summary is the reduction of the grid.
type summary struct {
	chaotic      int     // points with a positive exponent
	mean         float64 // of the exponents, summed row by row
	minL, maxL   float64 // the most stable and the most chaotic exponent
	minAt, maxAt [2]int  // their (row, column), the first in row-major order
}

// The summary handle's layout: 8 numbers.
const (
	sChaotic = iota
	sMean
	sMin
	sMinRow
	sMinCol
	sMax
	sMaxRow
	sMaxCol
	sLen
)

// result is what a run computed.
type result struct {
	lam     []float64 // rows x cols row-major: the exponents (on the master only)
	sum     summary
	perRank []int64 // tasks each rank ran, as each rank counted them
	byStats []int64 // the same from the master's scheduler's statistics
	workers int     // workers of the master's scheduler: every rank's cores
	elapsed time.Duration
}

func main() {
	c := defaultConfig()
	flag.IntVar(&c.rows, "rows", c.rows, "the grid has `n` rows (values of a)")
	flag.IntVar(&c.cols, "cols", c.cols, "the grid has `n` columns (values of b)")
	flag.Float64Var(&c.amin, "amin", c.amin, "the first row's rate a")
	flag.Float64Var(&c.amax, "amax", c.amax, "the last row's rate a")
	flag.Float64Var(&c.bmin, "bmin", c.bmin, "the first column's rate b")
	flag.Float64Var(&c.bmax, "bmax", c.bmax, "the last column's rate b")
	flag.StringVar(&c.pattern, "pattern", c.pattern, "the rates' pattern, of A and B (iteration n uses a or b after its letter n mod length)")
	flag.IntVar(&c.warmup, "warmup", c.warmup, "iterations dropped before measuring")
	flag.IntVar(&c.iters, "iters", c.iters, "iterations the exponent averages over")
	cli.Parse("sweep", cli.NoArgs)
	c.timing = true
	err := runtimeview.Run(context.Background(), 0, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		return run(ctx, rt, c, os.Stdout, os.Stderr)
	})
	if err != nil {
		log.Fatal(err)
	}
}

// run sweeps on every rank (rank 0 submits, the others serve); rank 0
// checks the result against the sequential sweep and prints it on out,
// and its progress on bar (a long run's; nothing for a short one).
func run(ctx context.Context, rt *runtimeview.RuntimeView, c config, out, bar io.Writer) error {
	if err := c.check(); err != nil {
		return err
	}
	got, err := sweep(ctx, rt, c, bar)
	if err != nil || rt.Rank() != 0 {
		return err
	}
	if !slices.Equal(got.perRank, got.byStats) {
		return fmt.Errorf("sweep: the ranks counted %v tasks run, the master's scheduler %v", got.perRank, got.byStats)
	}
	want := sequential(c)
	if i := firstDiff(got.lam, want.lam); i >= 0 {
		return fmt.Errorf("sweep: the exponent at a=%v, b=%v (row %d, column %d) is %v in the distributed run, %v in the sequential one",
			c.a(i/c.cols), c.b(i%c.cols), i/c.cols, i%c.cols, got.lam[i], want.lam[i])
	}
	if got.sum != want.sum {
		return fmt.Errorf("sweep: the distributed run's summary %+v differs from the sequential one's %+v", got.sum, want.sum)
	}
	s := got.sum
	fmt.Fprintf(out, "sweep: Lyapunov exponents of the logistic map, rates %q, a in [%g, %g] x b in [%g, %g] (%d x %d points, %d iterations each) on %s (%s backend, master rank 0): matches the sequential run\n",
		c.pattern, c.amin, c.amax, c.bmin, c.bmax, c.rows, c.cols, c.iters, ranks(rt.Size()), rt.Backend())
	fmt.Fprintf(out, "sweep: chaotic (exponent > 0) at %d of %d points (%.1f%%); mean exponent %.6g; most stable %.6g at a=%.6g, b=%.6g; most chaotic %.6g at a=%.6g, b=%.6g\n",
		s.chaotic, c.rows*c.cols, 100*float64(s.chaotic)/float64(c.rows*c.cols), s.mean,
		s.minL, c.a(s.minAt[0]), c.b(s.minAt[1]), s.maxL, c.a(s.maxAt[0]), c.b(s.maxAt[1]))
	fmt.Fprintf(out, "sweep: tasks run per rank %v (%d rows and the summary, %d workers in all)\n", got.perRank, c.rows, got.workers)
	if c.timing {
		fmt.Fprintf(out, "sweep: distributed %.3f s, sequential %.3f s: %.2fx\n",
			got.elapsed.Seconds(), want.elapsed.Seconds(), want.elapsed.Seconds()/got.elapsed.Seconds())
	}
	return nil
}

func (c config) check() error {
	switch {
	case c.rows < 1 || c.cols < 1 || c.iters < 1 || c.warmup < 0:
		return fmt.Errorf("sweep: -rows %d, -cols %d and -iters %d must be positive, -warmup %d not negative", c.rows, c.cols, c.iters, c.warmup)
	case c.pattern == "" || strings.Trim(c.pattern, "AB") != "":
		return fmt.Errorf("sweep: -pattern %q must be a non-empty string of A and B", c.pattern)
	case !(c.amin > 0 && c.amax <= 4 && c.bmin > 0 && c.bmax <= 4 && c.amin <= c.amax && c.bmin <= c.bmax):
		return fmt.Errorf("sweep: -amin %v, -amax %v, -bmin %v, -bmax %v: the rates must lie in (0, 4], where the logistic map keeps x in [0, 1], each min at most its max",
			c.amin, c.amax, c.bmin, c.bmax)
	}
	return nil
}

// a is row i's rate a, b column j's rate b.
func (c config) a(i int) float64 { return axis(c.amin, c.amax, i, c.rows) }
func (c config) b(j int) float64 { return axis(c.bmin, c.bmax, j, c.cols) }

func axis(lo, hi float64, i, n int) float64 {
	if n == 1 {
		return lo
	}
	return lo + float64((hi-lo)*float64(i)/float64(n-1))
}

// lyapunov is the exponent of the point (a, b): the mean over c.iters
// iterations of log |f'(x)| = log |r (1 - 2x)|, after c.warmup. Both
// runs call it, and each product is rounded (the float64 conversions)
// before it is added, so that no compiler fuses a multiply and an add
// into an FMA in one inlined copy and not in another: the distributed
// and sequential sweeps must do the same arithmetic to agree bit for bit.
func lyapunov(c config, a, b float64) float64 {
	x := 0.4 // not 1/2: at r = 4 it goes to 1, then stays at the fixed point 0
	rate := func(n int) float64 {
		if c.pattern[n%len(c.pattern)] == 'A' {
			return a
		}
		return b
	}
	for n := range c.warmup {
		r := rate(n)
		x = float64(r*x) * (1 - x)
	}
	sum := 0.0
	for n := c.warmup; n < c.warmup+c.iters; n++ {
		r := rate(n)
		d := math.Abs(float64(r * (1 - float64(2*x))))
		sum += math.Log(max(d, 1e-300)) // x = 1/2 exactly: a superstable point, not -Inf
		x = float64(r*x) * (1 - x)
	}
	return sum / float64(c.iters)
}

// row fills lam with row i's exponents.
func row(c config, i int, lam []float64) {
	a := c.a(i)
	for j := range lam {
		lam[j] = lyapunov(c, a, c.b(j))
	}
}

// reduce is the summary of the grid, row by row in order: the same in
// any run, whichever rank computed each row.
func reduce(rows [][]float64) summary {
	s := summary{minL: math.Inf(1), maxL: math.Inf(-1)}
	total, n := 0.0, 0
	for i, r := range rows {
		for j, l := range r {
			if l > 0 {
				s.chaotic++
			}
			if l < s.minL {
				s.minL, s.minAt = l, [2]int{i, j}
			}
			if l > s.maxL {
				s.maxL, s.maxAt = l, [2]int{i, j}
			}
			total += l
			n++
		}
	}
	s.mean = total / float64(n)
	return s
}

func (s summary) pack(v []float64) {
	v[sChaotic], v[sMean] = float64(s.chaotic), s.mean
	v[sMin], v[sMinRow], v[sMinCol] = s.minL, float64(s.minAt[0]), float64(s.minAt[1])
	v[sMax], v[sMaxRow], v[sMaxCol] = s.maxL, float64(s.maxAt[0]), float64(s.maxAt[1])
}

func unpack(v []float64) summary {
	return summary{
		chaotic: int(v[sChaotic]), mean: v[sMean],
		minL: v[sMin], minAt: [2]int{int(v[sMinRow]), int(v[sMinCol])},
		maxL: v[sMax], maxAt: [2]int{int(v[sMaxRow]), int(v[sMaxCol])},
	}
}

// codelets are the tasks' kinds. Every rank makes its own, closing over
// its rank, its own counter of the tasks it ran and the same
// configuration (under mpirun every process parses the same flags): a
// program keeps no package-level state, since in-process ranks share
// the package.
func codelets(c config, rank int, ran *atomic.Int64) (rowCl, sumCl *scheduler.Codelet) {
	rowCl = &scheduler.Codelet{Name: "lyapunov row", CPU: func(call *scheduler.Call) error {
		if c.beforeRow != nil {
			c.beforeRow(rank)
		}
		// The row's index, an int on every rank (dist.RunMaster sends a
		// task argument's Go type with it).
		row(c, call.Arg.(int), scheduler.VectorOf[float64](call, 0))
		ran.Add(1)
		return nil
	}}
	// The summary task: W summary, then R of every row in order.
	sumCl = &scheduler.Codelet{Name: "summary", CPU: func(call *scheduler.Call) error {
		rows := make([][]float64, call.Len()-1)
		for i := range rows {
			rows[i] = scheduler.VectorOf[float64](call, i+1)
		}
		reduce(rows).pack(scheduler.VectorOf[float64](call, 0))
		ran.Add(1)
		return nil
	}}
	return rowCl, sumCl
}

// sweep runs the sweep in master/worker mode: rank 0 submits a task per
// row and the summary, every rank's cores run them. It returns the
// result on rank 0 and the task counts on every rank.
func sweep(ctx context.Context, rt *runtimeview.RuntimeView, c config, bar io.Writer) (result, error) {
	var ran atomic.Int64 // this rank's: Run's closure, not a package variable
	rowCl, sumCl := codelets(c, rt.Rank(), &ran)
	reg, err := dist.NewRegistry(rowCl, sumCl) // every rank, the same names
	if err != nil {
		return result{}, err
	}
	// Every rank waits here, so that the time is the sweep's alone.
	if err := rt.Barrier(ctx); err != nil {
		return result{}, err
	}
	start := time.Now()
	var res result
	err = rt.RunMaster(ctx, 0, reg, func(ctx context.Context, m *dist.Master) error {
		// Only rank 0 runs this: a sequential program. The other ranks
		// serve its tasks meanwhile.
		res.lam = make([]float64, c.rows*c.cols)
		sum := make([]float64, sLen)
		s := m.Local()
		p := progress.New(bar, "sweep rows", c.rows+1)
		defer p.Done()
		done := scheduler.OnDone(func(error) { p.Add(1) })
		hs := make([]*scheduler.Handle, 0, c.rows+1)
		sh, err := s.RegisterVector(sum, scheduler.Named("summary"))
		if err != nil {
			return err
		}
		hs = append(hs, sh)
		sumArgs := []scheduler.Arg{scheduler.W(sh)}
		for i := range c.rows {
			h, err := s.RegisterVector(res.lam[i*c.cols:(i+1)*c.cols], scheduler.Named(fmt.Sprint("row ", i)))
			if err != nil {
				return err
			}
			hs = append(hs, h)
			if err := m.Submit(ctx, rowCl, scheduler.W(h), scheduler.WithArg(i), done); err != nil {
				return err
			}
			sumArgs = append(sumArgs, scheduler.R(h))
		}
		// The reduction: one task after every row (their W before its R),
		// reading the rows in order.
		if err := m.Submit(ctx, sumCl, append(sumArgs, done)...); err != nil {
			return err
		}
		if err := m.WaitAll(ctx); err != nil {
			return err
		}
		for _, h := range hs {
			if _, err := h.Unregister(ctx); err != nil {
				return err
			}
		}
		res.sum = unpack(sum)
		res.workers = m.Workers()
		res.byStats = make([]int64, rt.Size())
		for _, st := range s.Stats() {
			res.byStats[m.RankOf(st.Worker)] += st.Tasks
		}
		return nil
	})
	if err != nil {
		return result{}, err
	}
	// Every rank, after RunMaster: what each ran, as it counted.
	counts, err := runtimeview.AllGather(ctx, rt, []int64{ran.Load()})
	if err != nil {
		return result{}, err
	}
	for _, n := range counts {
		res.perRank = append(res.perRank, n[0])
	}
	res.elapsed = time.Since(start)
	return res, nil
}

// sequential runs the same sweep and reduction in a plain loop.
func sequential(c config) result {
	start := time.Now()
	res := result{lam: make([]float64, c.rows*c.cols)}
	rows := make([][]float64, c.rows)
	for i := range c.rows {
		rows[i] = res.lam[i*c.cols : (i+1)*c.cols]
		row(c, i, rows[i])
	}
	res.sum = reduce(rows)
	res.elapsed = time.Since(start)
	return res
}

func firstDiff(a, b []float64) int {
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// ranks is "1 rank" or "n ranks".
func ranks(n int) string {
	if n == 1 {
		return "1 rank"
	}
	return fmt.Sprintf("%d ranks", n)
}
