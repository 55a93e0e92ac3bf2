package gemm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/pzgo/pz/internal/apps/tiled"
	"github.com/pzgo/pz/internal/linalg"
	"github.com/pzgo/pz/internal/progress"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// RunDist computes C −= A·Bᵀ across every rank of rt: C's b×b tiles are
// distributed 2D block-cyclically on a P x Q process grid (opts.GridP x
// opts.GridQ, by default the most square), A's and B's panels of b rows
// each on one rank of the grid, and the tile task of C_ij runs on C_ij's
// owner, receiving the panels it reads. Each panel's and tile's owner
// generates it (tiled.RandomTile: the same matrices as Run's); no rank
// holds a whole matrix, except rank 0 with opts.Check: it collects C,
// generates A, B and C's start whole and samples C there. Every rank must call it; the Result is
// complete on rank 0.
func RunDist(ctx context.Context, rt *runtimeview.RuntimeView, opts Options, w io.Writer) (*Result, error) {
	here, root, err := tiled.PrepareDist(rt, opts.N, opts.Block, &opts.Precision, &opts.Seed, opts.Workers, opts.Warmup, &opts.GridP, &opts.GridQ)
	if err != nil {
		return nil, fmt.Errorf("gemm: %w", err)
	}
	if err := checkDistMemory(opts, rt.Size(), here, root, rt.MyResourceSet().RAM().AvailableBytes()); err != nil {
		return nil, err
	}
	if opts.Precision == 32 {
		return runDist[float32](ctx, rt, opts, w)
	}
	return runDist[float64](ctx, rt, opts, w)
}

// checkDistMemory refuses a run whose matrices do not fit in the memory
// available on this rank's host, which here ranks of size share: each
// holds its share of A's and B's panels and C's tiles, which it
// generates; with Check, the root (root: on this host) also collects C
// and generates A, B and C's start whole to sample it. Copies of other
// ranks' panels that a rank receives for its tasks are not counted.
func checkDistMemory(opts Options, size, here int, root bool, available uint64) error {
	m := tiled.MatrixBytes(opts.N, opts.Precision)
	need := float64(here) * 3 * m / float64(size)
	what := fmt.Sprintf("%d rank(s) here, each with its share of A's and B's panels and C's tiles (%d×%d fp%d)", here, opts.N, opts.N, opts.Precision)
	if opts.Check && root {
		need += 4 * m
		what += "; on rank 0, A, B, C's start and the collected C"
	}
	if err := tiled.CheckMemory(need, what, available); err != nil {
		return fmt.Errorf("gemm: n=%d: %w", opts.N, err)
	}
	return nil
}

func runDist[T linalg.Float](ctx context.Context, rt *runtimeview.RuntimeView, opts Options, w io.Writer) (_ *Result, err error) {
	n, b := opts.N, opts.Block
	nt := n / b
	sopts := tiled.SchedulerOptions(opts.Policy, opts.Workers, opts.SchedulerOptions)
	d, err := rt.Scheduler(ctx, sopts...)
	if err != nil {
		return nil, fmt.Errorf("gemm: %w", err)
	}
	var kt time.Duration
	var terr error
	if d.Rank() == 0 {
		// One task's kernel on a b×n panel pair, timed before anything
		// runs, so that nothing else uses the core.
		pa, pb, tmp := make([]T, b*n), make([]T, b*n), make([]T, b*b)
		tiled.RandomTile(pa, n, opts.Seed, 0, 0, b, n)
		tiled.RandomTile(pb, n, opts.Seed+1, 0, 0, b, n)
		kt, terr = tiled.TimeKernel(ctx, 3, 50*time.Millisecond, nil, func() { linalg.Gemm(b, b, n, pa, n, pb, n, tmp, b) })
	}
	if err := errors.Join(terr, rt.Barrier(ctx)); err != nil { // the others generate their parts after the timing
		return nil, fmt.Errorf("gemm: %w", err)
	}
	// A, B and C's start are Random with seeds Seed, Seed+1 and Seed+2,
	// as in Run; each owner generates its panels and tiles.
	grid := dist.BlockCyclic2D(opts.GridP, opts.GridQ)
	reg := func(name string, owner, rows, cols int, seed uint64, r0, c0 int) (*dist.Handle, error) {
		var data []T
		if owner == d.Rank() {
			data = make([]T, rows*cols)
			tiled.RandomTile(data, cols, seed, r0, c0, rows, cols)
		}
		h, err := dist.Register(d, owner, data, rows, cols, scheduler.Named(name))
		if err != nil {
			return nil, fmt.Errorf("gemm: %w", err)
		}
		return h, nil
	}
	ap, bp := make([]*dist.Handle, nt), make([]*dist.Handle, nt)
	for i := range nt {
		if ap[i], err = reg(fmt.Sprintf("A%d", i), grid.Owner(i, i), b, n, opts.Seed, i*b, 0); err != nil {
			return nil, err
		}
		if bp[i], err = reg(fmt.Sprintf("B%d", i), grid.Owner(i, i+1), b, n, opts.Seed+1, i*b, 0); err != nil {
			return nil, err
		}
	}
	ct := make([][]*dist.Handle, nt)
	for i := range nt {
		ct[i] = make([]*dist.Handle, nt)
		for j := range nt {
			if ct[i][j], err = reg(fmt.Sprintf("C(%d,%d)", i, j), grid.Owner(i, j), b, b, opts.Seed+2, i*b, j*b); err != nil {
				return nil, err
			}
		}
	}
	cl := NewCodelet[T]()
	g, err := tiled.AttachGPU(d.Local()) // nil without GPU workers
	if err != nil {
		return nil, fmt.Errorf("gemm: rank %d: %w", d.Rank(), err)
	}
	// Before the scheduler closes: the handles live in its workers' contexts.
	defer tiled.Release(&err, "gemm: releasing the GPU libraries", g.Close)
	if g != nil {
		cl.CUDA = tiled.GemmCUDA[T](g)
	}
	if err := rt.Barrier(ctx); err != nil {
		return nil, fmt.Errorf("gemm: %w", err)
	}
	before := d.Stats()
	devBefore := tiled.DeviceFigures(d.Local())
	var bar *progress.Bar
	if w != nil && d.Rank() == 0 {
		// Each task runs on the owner of its C tile: rank 0's callbacks
		// see the tasks of its own tiles only.
		mine := 0
		for i := range nt {
			for j := range nt {
				if ct[i][j].Owner() == 0 {
					mine++
				}
			}
		}
		bar = progress.New(w, "gemm tasks on rank 0", mine)
	}
	t0 := time.Now()
	for i := range nt {
		for j := range nt {
			err = d.Submit(ctx, cl, dist.R(ap[i]), dist.R(bp[j]), dist.RW(ct[i][j]),
				dist.With(scheduler.WithCallback(func(*scheduler.Task) {
					if bar != nil {
						bar.Add(1)
					}
				})))
			if err != nil {
				return nil, fmt.Errorf("gemm: submitting tile (%d,%d): %w", i, j, err)
			}
		}
	}
	if err := d.WaitAll(ctx); err != nil {
		return nil, fmt.Errorf("gemm: %w", err)
	}
	elapsed := time.Since(t0)
	if bar != nil {
		bar.Done()
	}
	sent := tiled.Sent(before, d.Stats())
	totals, err := tiled.SumRanks(ctx, rt.Comm(), elapsed, sent, tiled.DeviceFigures(d.Local()).Sub(devBefore))
	if err != nil {
		return nil, fmt.Errorf("gemm: %w", err)
	}
	elapsed = totals.Elapsed
	flops := linalg.GemmFlops(n, n, n)
	res := &Result{
		App: "gemm", N: n, Block: b, Precision: opts.Precision,
		Policy: d.Local().Policy(), Workers: len(d.Local().Workers()), Backend: linalg.Backend,
		Tasks: nt * nt, Seconds: elapsed.Seconds(), GFlops: tiled.GFlops(flops, elapsed),
		Ranks: rt.Size(), Grid: fmt.Sprintf("%dx%d", opts.GridP, opts.GridQ), Messages: totals.Messages, BytesSent: totals.BytesSent,
		Devices: totals.Devices,
	}
	if d.Rank() == 0 && kt > 0 {
		res.SeqGFlops = tiled.GFlops(linalg.GemmFlops(b, b, n), kt)
		res.Efficiency = float64(nt*nt) * kt.Seconds() / (float64(res.Workers*rt.Size()) * elapsed.Seconds())
	}
	if opts.Check {
		c, err := tiled.Collect[T](ctx, d, ct, n)
		if err != nil {
			return nil, fmt.Errorf("gemm: collecting C: %w", err)
		}
		if d.Rank() == 0 {
			a, bm, c0 := tiled.Random[T](n, n, opts.Seed), tiled.Random[T](n, n, opts.Seed+1), tiled.Random[T](n, n, opts.Seed+2)
			res.Checked, res.MaxRelErr = true, maxRelErr(a, bm, c0, c, n, opts.Seed)
		}
	}
	return res, nil
}
