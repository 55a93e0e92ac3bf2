package cholesky

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

// RunDist factors the seeded SPD matrix across every rank of rt: the tiles
// of its lower triangle are distributed 2D block-cyclically on a P x Q
// process grid (opts.GridP x opts.GridQ; by default the most square grid),
// each tile's owner generates it (tiled.SPDTile: the same matrix as Run's),
// every rank submits the same tile tasks to rt's distributed scheduler, and
// each task runs on the owner of the tile it writes, receiving the tiles it
// reads from their writers. No rank holds the whole matrix, except rank 0
// with opts.Check: it collects the factor, generates the matrix whole and
// computes the residual. Every rank must call it; the Result
// is complete on rank 0 (others get their own counts only).
func RunDist(ctx context.Context, rt *runtimeview.RuntimeView, opts Options, w io.Writer) (*Result, error) {
	here, root, err := tiled.PrepareDist(rt, opts.N, opts.Block, &opts.Precision, &opts.Seed, opts.Workers, opts.Warmup, &opts.GridP, &opts.GridQ)
	if err != nil {
		return nil, fmt.Errorf("cholesky: %w", err)
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
// holds its share of the lower triangle's b×b tiles, which it generates;
// with Check, the root (root: on this host) also collects the factor,
// generates the matrix whole for the residual and copies the factor to
// float64. Copies of other ranks' tiles that a rank receives for its
// tasks are not counted.
func checkDistMemory(opts Options, size, here int, root bool, available uint64) error {
	n, nt := opts.N, opts.N/opts.Block
	tiles := float64(nt) * float64(nt+1) / 2 * tiled.MatrixBytes(opts.Block, opts.Precision)
	need := float64(here) * tiles / float64(size)
	what := fmt.Sprintf("%d rank(s) here, each with its share of the %d tiles of %d×%d fp%d", here, nt*(nt+1)/2, opts.Block, opts.Block, opts.Precision)
	if opts.Check && root {
		need += 2*tiled.MatrixBytes(n, opts.Precision) + tiled.MatrixBytes(n, 64)
		what += fmt.Sprintf("; on rank 0, the %d×%d matrix, the collected factor and its fp64 copy", n, n)
	}
	if err := tiled.CheckMemory(need, what, available); err != nil {
		return fmt.Errorf("cholesky: n=%d: %w", n, err)
	}
	return nil
}

func runDist[T linalg.Float](ctx context.Context, rt *runtimeview.RuntimeView, opts Options, w io.Writer) (_ *Result, err error) {
	n, b := opts.N, opts.Block
	nt := n / b
	sopts := tiled.SchedulerOptions(opts.Policy, opts.Workers, opts.SchedulerOptions)
	d, err := rt.Scheduler(ctx, sopts...)
	if err != nil {
		return nil, fmt.Errorf("cholesky: %w", err)
	}
	var kt kernelTimes
	var terr error
	if d.Rank() == 0 {
		kt, terr = timeKernels[T](ctx, b, taskCounts(nt)) // before anything runs, so nothing else uses the core
	}
	if err := errors.Join(terr, rt.Barrier(ctx)); err != nil {
		return nil, fmt.Errorf("cholesky: %w", err)
	}
	grid := dist.BlockCyclic2D(opts.GridP, opts.GridQ)
	tiles := make([][]*dist.Handle, nt)
	for i := range nt {
		tiles[i] = make([]*dist.Handle, i+1)
		for j := 0; j <= i; j++ {
			owner := grid.Owner(i, j)
			var t []T
			if owner == d.Rank() {
				t = make([]T, b*b)
			}
			h, err := dist.Register(d, owner, t, b, b, scheduler.Named(fmt.Sprintf("A(%d,%d)", i, j)))
			if err != nil {
				return nil, fmt.Errorf("cholesky: %w", err)
			}
			tiles[i][j] = h
		}
	}
	// Each run starts from A: a fill task on each tile's owner generates
	// the tile (a task, so that the distributed scheduler knows the owner
	// holds the only valid version).
	fill := &scheduler.Codelet{Name: "cholesky_fill", CPU: func(c *scheduler.Call) error {
		at := c.Arg.(tile)
		m := scheduler.MatrixOf[T](c, 0)
		tiled.SPDTile(m.Data, m.Stride, n, opts.Seed, at.i*b, at.j*b, b, b)
		return nil
	}}
	cl := newCodelets[T]()
	g, err := tiled.AttachGPU(d.Local()) // nil without GPU workers
	if err != nil {
		return nil, fmt.Errorf("cholesky: rank %d: %w", d.Rank(), err)
	}
	// Before the scheduler closes: the handles live in its workers' contexts.
	defer tiled.Release(&err, "cholesky: releasing the GPU libraries", g.Close)
	cl = WithGPU[T](cl, g)
	var elapsed time.Duration
	var sent dist.Stats
	var dev tiled.Devices
	for it := 0; it <= opts.Warmup; it++ {
		for i := range nt {
			for j := 0; j <= i; j++ {
				if err := d.Submit(ctx, fill, dist.W(tiles[i][j]), dist.With(scheduler.WithArg(tile{i, j}))); err != nil {
					return nil, fmt.Errorf("cholesky: %w", err)
				}
			}
		}
		if err := d.WaitAll(ctx); err != nil {
			return nil, fmt.Errorf("cholesky: %w", err)
		}
		before := d.Stats()
		devBefore := tiled.DeviceFigures(d.Local())
		if err := rt.Barrier(ctx); err != nil {
			return nil, fmt.Errorf("cholesky: %w", err)
		}
		elapsed, err = factorDist(ctx, d, cl, tiles, w)
		if err != nil {
			return nil, err
		}
		sent = tiled.Sent(before, d.Stats())
		dev = tiled.DeviceFigures(d.Local()).Sub(devBefore)
	}
	// The slowest rank's time is the factorization's.
	totals, err := tiled.SumRanks(ctx, rt.Comm(), elapsed, sent, dev)
	if err != nil {
		return nil, fmt.Errorf("cholesky: %w", err)
	}
	elapsed = totals.Elapsed
	cnt := taskCounts(nt)
	flops := linalg.CholeskyFlops(n)
	res := &Result{
		App: "cholesky", Layout: "tile", N: n, Block: b, Precision: opts.Precision,
		Policy: d.Local().Policy(), Workers: len(d.Local().Workers()), Backend: linalg.Backend,
		Tasks: cnt.total(), Seconds: elapsed.Seconds(), GFlops: tiled.GFlops(flops, elapsed),
		Ranks: rt.Size(), Grid: fmt.Sprintf("%dx%d", opts.GridP, opts.GridQ),
		Messages: totals.Messages, BytesSent: totals.BytesSent, Devices: totals.Devices,
	}
	if d.Rank() == 0 {
		seq := float64(cnt.potrf)*kt.potrf.Seconds() + float64(cnt.trsm)*kt.trsm.Seconds() +
			float64(cnt.syrk)*kt.syrk.Seconds() + float64(cnt.gemm)*kt.gemm.Seconds()
		res.KernelGFlops = map[string]float64{
			"potrf": tiled.GFlops(linalg.PotrfFlops(b), kt.potrf),
			"trsm":  tiled.GFlops(linalg.TrsmFlops(b, b), kt.trsm),
			"syrk":  tiled.GFlops(linalg.SyrkFlops(b, b), kt.syrk),
			"gemm":  tiled.GFlops(linalg.GemmFlops(b, b, b), kt.gemm),
		}
		if seq > 0 {
			res.SeqGFlops = flops / seq / 1e9
			res.Efficiency = seq / (float64(res.Workers*rt.Size()) * elapsed.Seconds())
		}
	}
	if opts.Check {
		l, err := tiled.Collect[T](ctx, d, tiles, n)
		if err != nil {
			return nil, fmt.Errorf("cholesky: collecting the factor: %w", err)
		}
		if d.Rank() == 0 {
			// The matrix whole, for the residual only.
			r, err := Residual(ctx, tiled.SPD[T](n, opts.Seed), l, n, b, res.Workers)
			if err != nil {
				return nil, err
			}
			res.Checked, res.Residual = true, r
		}
	}
	return res, nil
}

// factorDist submits the tile tasks to d and waits for them on every rank;
// it returns the time from the first submission to the end of WaitAll.
func factorDist(ctx context.Context, d *dist.Scheduler, cl *Codelets, tiles [][]*dist.Handle, w io.Writer) (time.Duration, error) {
	nt := len(tiles)
	var bar *progress.Bar
	if w != nil && d.Rank() == 0 {
		// A task runs on the owner of the tile it writes: rank 0's bar
		// counts the tasks of its own tiles, which its callbacks see.
		mine := 0
		for i := range nt {
			for j := 0; j <= i; j++ {
				if tiles[i][j].Owner() == 0 {
					mine += tileTasks(j)
				}
			}
		}
		bar = progress.New(w, "cholesky tasks on rank 0", mine)
	}
	done := dist.With(scheduler.WithCallback(func(*scheduler.Task) {
		if bar != nil {
			bar.Add(1)
		}
	}))
	t0 := time.Now()
	err := walkGraph(nt, func(c *scheduler.Codelet, prio int, at tile, acc ...access) error {
		args := make([]dist.Arg, 0, len(acc)+3)
		for _, a := range acc {
			if a.write {
				args = append(args, dist.RW(tiles[a.i][a.j]))
			} else {
				args = append(args, dist.R(tiles[a.i][a.j]))
			}
		}
		args = append(args, dist.With(scheduler.WithPriority(prio)), dist.With(scheduler.WithArg(at)), done)
		if err := d.Submit(ctx, c, args...); err != nil {
			return fmt.Errorf("cholesky: submitting %s%v: %w", c.Name, at, err)
		}
		return nil
	}, cl)
	werr := d.WaitAll(ctx)
	elapsed := time.Since(t0)
	if bar != nil {
		bar.Done()
	}
	if err == nil && werr != nil {
		err = fmt.Errorf("cholesky: %w", werr)
	}
	return elapsed, err
}
