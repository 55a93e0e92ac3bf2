package cholesky

import (
	"context"
	"fmt"
	"github.com/pzgo/pz/internal/plural"
	"io"
	"math"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pzgo/pz/internal/apps/tiled"
	"github.com/pzgo/pz/internal/linalg"
	"github.com/pzgo/pz/internal/progress"
	"github.com/pzgo/pz/scheduler"
)

// Options configure one run. The zero value of each optional field
// selects its default.
type Options struct {
	// N is the matrix order; it must be a multiple of Block.
	N int
	// Block is the tile size b: the matrix is cut into (N/b)² tiles.
	Block int
	// Precision is 32 (float32, the default) or 64 (float64).
	Precision int
	// Policy is the scheduling policy's name; "" takes the scheduler's
	// default (PZ_SCHED, else lws).
	Policy string
	// Workers is the number of CPU workers; 0 takes the scheduler's
	// default (PZ_NCPU, else one per allowed core).
	Workers int
	// Check computes the residual ‖A − L·Lᵀ‖_F / ‖A‖_F after the run.
	Check bool
	// Seed selects the random SPD matrix (tiled.SPD); 0 means 1.
	Seed uint64
	// MatrixLayout factors the matrix in place as one row-major N×N
	// array cut into tiles with leading dimension N (StarPU's
	// cholesky_implicit layout). By default the matrix is first copied
	// into tile layout (TileMatrix; the copies are not timed), which
	// makes the kernels faster on large matrices.
	MatrixLayout bool
	// Warmup is the number of untimed factorizations run first on the
	// same scheduler (each of a fresh copy of A): they calibrate the
	// performance models the dmda policy needs.
	Warmup int
	// SchedulerOptions are passed to scheduler.New after the policy and
	// worker options (tracing, model directory, ...).
	SchedulerOptions []scheduler.Option
	// GridP and GridQ are the process grid of RunDist (P*Q ranks); zero
	// takes the most square grid (dist.Grid).
	GridP, GridQ int
	// DeviceOnly runs every tile task on the scheduler's devices (a
	// scheduling context of their workers), as a GPU-only run does: with
	// a device smaller than the matrix, the factorization is out of core.
	DeviceOnly bool
	// GPUReference also times one vendor-library call on the whole
	// matrix on the first GPU (pzrun -cuda-reference; needs a CUDA
	// driver, cuBLAS and cuSOLVER), reported beside the tiled rate.
	GPUReference bool
	// Pageable leaves the matrix in pageable memory. With GPUs the
	// matrix (or, in tile layout, each tile) is otherwise page-locked
	// for the factorization (scheduler.PinHost, not timed), so that its
	// tiles move asynchronously at the bus's full speed.
	Pageable bool
}

// A Result is the outcome of one run. Its JSON form is printed by
// `pzrun cholesky --json`; field names are a stable interface:
//
//	app             "cholesky"
//	layout          "tile" (tile-major copy, the default) or "matrix" (in place, leading dimension n)
//	n, block        matrix order and tile size
//	precision       32 or 64
//	policy          scheduling policy that ran
//	workers         workers: the CPU workers and one per device
//	backend         tile kernels: "gonum" or "openblas" (linalg.Backend)
//	tasks           tile tasks submitted (POTRF+TRSM+SYRK+GEMM)
//	seconds         wall time from the first submission to the end of the last task
//	gflops          n³/3 / seconds / 10⁹ (StarPU's convention)
//	seq_gflops      one worker's rate running the same tasks one after the
//	                other: n³/3 / Σ(task count × fastest kernel time) / 10⁹,
//	                kernel times measured on b×b tiles in this run
//	efficiency      gflops / (workers × seq_gflops)
//	kernel_gflops   each kernel's sequential GFLOP/s on a b×b tile; 0 for a
//	                kernel the run has no task of (one tile: POTRF alone;
//	                2×2 tiles: no GEMM), which is not timed
//	checked         whether the residual was computed
//	residual        ‖A − L·Lᵀ‖_F / ‖A‖_F (0 unless checked)
//	ranks           ranks that factored the matrix (1: one rank's scheduler)
//	grid            the P x Q process grid, e.g. "1x2" (ranks > 1 only)
//	messages        tiles sent between ranks during the factorization
//	bytes_sent      their bytes (the owner-computes minimum: each tile
//	                version goes once to each rank that reads it)
//	devices, device_tasks, device_bytes, evictions, write_backs
//	                the devices' figures (tiled.Devices; 0 without devices)
//	gpu_reference_gflops, gpu_reference_ratio
//	                one library call on the whole matrix on a GPU, and
//	                gflops over it (tiled.Reference; absent unless asked)
//
// With several ranks workers is per rank and efficiency is
// gflops / (ranks × workers × seq_gflops).
type Result struct {
	App          string             `json:"app"`
	Layout       string             `json:"layout"`
	N            int                `json:"n"`
	Block        int                `json:"block"`
	Precision    int                `json:"precision"`
	Policy       string             `json:"policy"`
	Workers      int                `json:"workers"`
	Backend      string             `json:"backend"`
	Tasks        int                `json:"tasks"`
	Seconds      float64            `json:"seconds"`
	GFlops       float64            `json:"gflops"`
	SeqGFlops    float64            `json:"seq_gflops"`
	Efficiency   float64            `json:"efficiency"`
	KernelGFlops map[string]float64 `json:"kernel_gflops"`
	Checked      bool               `json:"checked"`
	Residual     float64            `json:"residual"`
	Ranks        int                `json:"ranks"`
	Grid         string             `json:"grid,omitempty"`
	Messages     int64              `json:"messages"`
	BytesSent    int64              `json:"bytes_sent"`
	tiled.Devices
	tiled.Reference
}

// String formats r as one human-readable line.
func (r *Result) String() string {
	ranks := ""
	if r.Ranks > 1 {
		ranks = fmt.Sprintf(" ranks=%d grid=%s", r.Ranks, r.Grid)
	}
	s := fmt.Sprintf("cholesky n=%d b=%d fp%d %s layout=%s%s policy=%s workers=%d tasks=%d: %.3f s, %.2f GFLOP/s, efficiency %.2f (sequential kernels %.2f GFLOP/s)",
		r.N, r.Block, r.Precision, r.Backend, r.Layout, ranks, r.Policy, r.Workers, r.Tasks, r.Seconds, r.GFlops, r.Efficiency, r.SeqGFlops)
	if r.Ranks > 1 {
		s += fmt.Sprintf(", %s sent (%.1f MiB)", plural.Of(int(r.Messages), "tile"), float64(r.BytesSent)/(1<<20))
	}
	s += r.Devices.String() + r.Reference.String()
	if r.Checked {
		s += fmt.Sprintf(", residual %.3g", r.Residual)
	}
	return s
}

// Tolerance returns a bound on the residual of a correct factorization
// in the given precision: a backward-stable Cholesky has a residual of a
// modest multiple of the unit roundoff (Higham, Accuracy and Stability of
// Numerical Algorithms, Thm. 10.3); the bound leaves a factor of 100.
func Tolerance(precision, n int) float64 {
	eps := 0x1p-52
	if precision == 32 {
		eps = 0x1p-23
	}
	return 100 * eps * math.Sqrt(float64(n))
}

// Run generates the seeded SPD matrix, times each tile kernel on one
// worker, factors the matrix with tile tasks on a new scheduler, and,
// with opts.Check, computes the residual. Progress, when non-nil, gets a
// progress bar if it is a terminal. Run returns an error wrapping
// tiled.ErrBadOptions for invalid options, the scheduler's error, or
// linalg.ErrNotPositiveDefinite from a failed POTRF task.
func Run(ctx context.Context, opts Options, progress io.Writer) (*Result, error) {
	if err := tiled.Prepare(opts.N, opts.Block, &opts.Precision, &opts.Seed, opts.Workers, opts.Warmup); err != nil {
		return nil, fmt.Errorf("cholesky: %w", err)
	}
	if err := checkMemory(opts, tiled.AvailableMemory(ctx)); err != nil {
		return nil, err
	}
	if opts.Precision == 32 {
		return run[float32](ctx, opts, progress)
	}
	return run[float64](ctx, opts, progress)
}

// checkMemory refuses a one-rank run whose matrices do not fit in the
// available memory: the matrix, the factor, the tiles of its lower
// triangle (tile layout) and, with Check, the factor in float64.
func checkMemory(opts Options, available uint64) error {
	n, nt := opts.N, opts.N/opts.Block
	need := 2 * tiled.MatrixBytes(n, opts.Precision)
	what := fmt.Sprintf("the %d×%d fp%d matrix and its factor", n, n, opts.Precision)
	if !opts.MatrixLayout {
		need += float64(nt) * float64(nt+1) / 2 * tiled.MatrixBytes(opts.Block, opts.Precision)
		what += ", the tiles of its lower triangle"
	}
	if opts.Check {
		need += tiled.MatrixBytes(n, 64)
		what += ", the residual's fp64 copy"
	}
	if err := tiled.CheckMemory(need, what, available); err != nil {
		return fmt.Errorf("cholesky: n=%d: %w", n, err)
	}
	return nil
}

func run[T linalg.Float](ctx context.Context, opts Options, w io.Writer) (_ *Result, err error) {
	n, b := opts.N, opts.Block
	a0 := tiled.SPD[T](n, opts.Seed)
	a := make([]T, len(a0))

	sopts := tiled.SchedulerOptions(opts.Policy, opts.Workers, opts.SchedulerOptions)
	s, err := scheduler.New(ctx, sopts...)
	if err != nil {
		return nil, fmt.Errorf("cholesky: %w", err)
	}
	defer tiled.Release(&err, "cholesky: closing the scheduler", s.Close)

	nt := n / b
	cnt := taskCounts(nt)
	kt, err := timeKernels[T](ctx, b, cnt)
	if err != nil {
		return nil, fmt.Errorf("cholesky: %w", err)
	}
	seq := float64(cnt.potrf)*kt.potrf.Seconds() + float64(cnt.trsm)*kt.trsm.Seconds() +
		float64(cnt.syrk)*kt.syrk.Seconds() + float64(cnt.gemm)*kt.gemm.Seconds()

	cl := newCodelets[T]()
	g, err := tiled.AttachGPU(s) // nil without GPU workers
	if err != nil {
		return nil, fmt.Errorf("cholesky: %w", err)
	}
	// Before the scheduler closes: the handles live in its workers' contexts.
	defer tiled.Release(&err, "cholesky: releasing the GPU libraries", g.Close)
	cl = WithGPU[T](cl, g)
	fctx := ctx
	if opts.DeviceOnly {
		var ids []int
		for _, wi := range s.Workers() {
			if wi.Kind != scheduler.CPUWorker {
				ids = append(ids, wi.ID)
			}
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("cholesky: %w: DeviceOnly (-device-only) needs devices (pzrun: -sim N, or -cuda N on a machine with GPUs)", tiled.ErrBadOptions)
		}
		c, err := s.NewContext("devices", scheduler.ContextWorkers(ids...))
		if err != nil {
			return nil, fmt.Errorf("cholesky: %w", err)
		}
		fctx = scheduler.Within(ctx, c)
	}
	var elapsed time.Duration
	var dev tiled.Devices
	for it := 0; it <= opts.Warmup; it++ {
		dev = tiled.DeviceFigures(s)
		var arrays [][]T
		var tm *TileMatrix[T]
		if opts.MatrixLayout {
			copy(a, a0)
			arrays = [][]T{a}
		} else {
			tm = ToTiles(a0, n, b)
			for _, row := range tm.Tiles {
				arrays = append(arrays, row...)
			}
		}
		unpin, err := tiled.Pin(s, opts.Pageable, arrays...)
		if err != nil {
			return nil, fmt.Errorf("cholesky: %w", err)
		}
		if opts.MatrixLayout {
			elapsed, err = Factor(fctx, s, cl, a, n, b, w)
		} else {
			elapsed, err = FactorTiles(fctx, s, cl, tm, w)
			tm.CopyTo(a)
		}
		if uerr := unpin(); uerr != nil && err == nil {
			err = fmt.Errorf("cholesky: %w", uerr)
		}
		if err != nil {
			return nil, err
		}
	}

	if opts.DeviceOnly {
		// The workers publish their task counts in batches, and by the
		// global WaitAll at the latest (a context's waits for its tasks only).
		if err := s.WaitAll(ctx); err != nil {
			return nil, fmt.Errorf("cholesky: %w", err)
		}
	}
	flops := linalg.CholeskyFlops(n)
	res := &Result{
		App: "cholesky", Layout: layoutName(opts.MatrixLayout), N: n, Block: b, Precision: opts.Precision,
		Policy: s.Policy(), Workers: len(s.Workers()), Backend: linalg.Backend,
		Tasks:   cnt.total(),
		Ranks:   1,
		Seconds: elapsed.Seconds(),
		GFlops:  tiled.GFlops(flops, elapsed),
		KernelGFlops: map[string]float64{
			"potrf": tiled.GFlops(linalg.PotrfFlops(b), kt.potrf),
			"trsm":  tiled.GFlops(linalg.TrsmFlops(b, b), kt.trsm),
			"syrk":  tiled.GFlops(linalg.SyrkFlops(b, b), kt.syrk),
			"gemm":  tiled.GFlops(linalg.GemmFlops(b, b, b), kt.gemm),
		},
		Devices: tiled.DeviceFigures(s).Sub(dev),
	}
	res.Pinned = !opts.Pageable && tiled.HasGPUs(s)
	if seq > 0 {
		res.SeqGFlops = flops / seq / 1e9
		res.Efficiency = seq / (float64(res.Workers) * elapsed.Seconds())
	}
	if opts.GPUReference {
		d, err := tiled.ReferenceCholesky[T](ctx, a0, n)
		if err != nil {
			return nil, fmt.Errorf("cholesky: GPU reference: %w", err)
		}
		res.Reference = tiled.NewReference(flops, d, res.GFlops)
	}
	if opts.Check {
		r, err := Residual(ctx, a0, a, n, b, res.Workers)
		if err != nil {
			return nil, err
		}
		res.Checked, res.Residual = true, r
	}
	return res, nil
}

func layoutName(matrix bool) string {
	if matrix {
		return "matrix"
	}
	return "tile"
}

// counts are the tile tasks of each kind in a Cholesky of nt×nt tiles.
type counts struct{ potrf, trsm, syrk, gemm int }

func taskCounts(nt int) counts {
	// Step k has one POTRF, nt-k-1 TRSMs and SYRKs, and (nt-k-1)(nt-k-2)/2
	// GEMMs.
	var c counts
	for k := range nt {
		m := nt - k - 1
		c.potrf++
		c.trsm += m
		c.syrk += m
		c.gemm += m * (m - 1) / 2
	}
	return c
}

func (c counts) total() int { return c.potrf + c.trsm + c.syrk + c.gemm }

type kernelTimes struct{ potrf, trsm, syrk, gemm time.Duration }

// timeKernels measures each kernel on b×b tiles on the calling goroutine
// (one core, nothing else of this run executing): the fastest call.
// A kernel the run has no task of (cnt; GEMM with fewer than 3 tiles
// a side) is not timed: its time is 0. It returns ctx's cause when ctx
// is done during the timing.
func timeKernels[T linalg.Float](ctx context.Context, b int, cnt counts) (kernelTimes, error) {
	const (
		reps  = 5                     // best of at least 5 calls
		total = 50 * time.Millisecond // and of at least 50 ms per kernel
	)
	spd := tiled.SPD[T](b, 2)
	l := append([]T(nil), spd...)
	if err := linalg.Potrf(b, l, b); err != nil {
		panic(err) // tiled.SPD is SPD by construction
	}
	x := tiled.Random[T](b, b, 3)
	y := tiled.Random[T](b, b, 4)
	c := tiled.Random[T](b, b, 5)
	tmp := make([]T, b*b)
	var kt kernelTimes
	for _, k := range []struct {
		count      int
		d          *time.Duration
		prep, call func()
	}{
		{cnt.potrf, &kt.potrf, func() { copy(tmp, spd) }, func() { _ = linalg.Potrf(b, tmp, b) }},
		{cnt.trsm, &kt.trsm, func() { copy(tmp, x) }, func() { linalg.Trsm(b, b, l, b, tmp, b) }},
		{cnt.syrk, &kt.syrk, nil, func() { linalg.Syrk(b, b, x, b, c, b) }},
		{cnt.gemm, &kt.gemm, nil, func() { linalg.Gemm(b, b, b, x, b, y, b, c, b) }},
	} {
		if k.count == 0 {
			continue
		}
		d, err := tiled.TimeKernel(ctx, reps, total, k.prep, k.call)
		if err != nil {
			return kernelTimes{}, err
		}
		*k.d = d
	}
	return kt, nil
}

// Residual returns ‖A − L·Lᵀ‖_F / ‖A‖_F for the symmetric n×n matrix a0
// and the factored matrix l (its lower triangle is L), accumulated in
// float64 with the Gemm kernel, one b×b tile of the lower triangle per
// goroutine with at most workers at once. Tiles' sums are combined in a
// fixed order, so the result is deterministic.
func Residual[T linalg.Float](ctx context.Context, a0, l []T, n, b, workers int) (float64, error) {
	if err := tiled.CheckShape(n, b, 64); err != nil {
		return 0, fmt.Errorf("cholesky: residual: %w", err)
	}
	// L in float64 with its upper triangle zeroed, so that one Gemm over
	// the first (j+1)·b columns gives tile (i, j) of L·Lᵀ.
	l64 := make([]float64, n*n)
	for i := range n {
		for j := 0; j <= i; j++ {
			l64[i*n+j] = float64(l[i*n+j])
		}
	}
	nt := n / b
	type sums struct{ r, a float64 }
	part := make([]sums, nt*nt)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, workers))
	for i := range nt {
		for j := 0; j <= i; j++ {
			g.Go(func() error {
				if err := gctx.Err(); err != nil {
					return err
				}
				r := make([]float64, b*b)
				var sa float64
				for ii := range b {
					for jj := range b {
						v := float64(a0[(i*b+ii)*n+j*b+jj])
						r[ii*b+jj] = v
						sa += v * v
					}
				}
				linalg.Gemm(b, b, (j+1)*b, l64[i*b*n:], n, l64[j*b*n:], n, r, b)
				var sr float64
				for _, v := range r {
					sr += v * v
				}
				w := 2.0 // an off-diagonal tile stands for its mirror too
				if i == j {
					w = 1
				}
				part[i*nt+j] = sums{w * sr, w * sa}
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return 0, fmt.Errorf("cholesky: residual: %w", err)
	}
	var sr, sa float64
	for _, p := range part {
		sr += p.r
		sa += p.a
	}
	return math.Sqrt(sr / sa), nil
}

// Codelets are the four tile tasks of a Cholesky factorization in one
// precision, each with a history performance model.
type Codelets struct {
	Potrf, Trsm, Syrk, Gemm *scheduler.Codelet
}

// NewCodelets returns the tile codelets in precision T, for callers that
// submit factorizations themselves (FactorTiles into a scheduling context,
// as the contexts demo does).
func NewCodelets[T linalg.Float]() *Codelets { return newCodelets[T]() }

func newCodelets[T linalg.Float]() *Codelets {
	suffix := "f64"
	var z T
	if _, ok := any(z).(float32); ok {
		suffix = "f32"
	}
	mk := func(name string, fn scheduler.CPUFunc, flops func(*scheduler.Task) float64) *scheduler.Codelet {
		full := "cholesky_" + name + "_" + suffix
		return &scheduler.Codelet{Name: full, CPU: fn, Model: scheduler.HistoryModel(full), Flops: flops}
	}
	tileFlops := func(f func(b int) float64) func(*scheduler.Task) float64 {
		return func(t *scheduler.Task) float64 { return f(t.Access[len(t.Access)-1].Handle.Rows()) }
	}
	return &Codelets{
		Potrf: mk("potrf", func(c *scheduler.Call) error {
			m := scheduler.MatrixOf[T](c, 0)
			if err := linalg.Potrf(m.Rows, m.Data, m.Stride); err != nil {
				return fmt.Errorf("tile %v: %w", c.Arg, err)
			}
			return nil
		}, tileFlops(linalg.PotrfFlops)),
		Trsm: mk("trsm", func(c *scheduler.Call) error {
			l, a := scheduler.MatrixOf[T](c, 0), scheduler.MatrixOf[T](c, 1)
			linalg.Trsm(a.Rows, a.Cols, l.Data, l.Stride, a.Data, a.Stride)
			return nil
		}, tileFlops(func(b int) float64 { return linalg.TrsmFlops(b, b) })),
		Syrk: mk("syrk", func(c *scheduler.Call) error {
			a, t := scheduler.MatrixOf[T](c, 0), scheduler.MatrixOf[T](c, 1)
			linalg.Syrk(t.Rows, a.Cols, a.Data, a.Stride, t.Data, t.Stride)
			return nil
		}, tileFlops(func(b int) float64 { return linalg.SyrkFlops(b, b) })),
		Gemm: mk("gemm", func(c *scheduler.Call) error {
			a, b, t := scheduler.MatrixOf[T](c, 0), scheduler.MatrixOf[T](c, 1), scheduler.MatrixOf[T](c, 2)
			linalg.Gemm(t.Rows, t.Cols, a.Cols, a.Data, a.Stride, b.Data, b.Stride, t.Data, t.Stride)
			return nil
		}, tileFlops(func(b int) float64 { return linalg.GemmFlops(b, b, b) })),
	}
}

// Factor overwrites the lower triangle of the n×n row-major matrix a with
// its Cholesky factor L, as tile tasks on s: it registers a, cuts it into
// b×b tiles and submits, for each step k, POTRF of tile (k,k), TRSM of the
// tiles below it, then SYRK and GEMM updates of the trailing matrix — the
// right-looking order of StarPU's cholesky_implicit, with its priorities
// (the longest remaining path first) — letting the scheduler infer the
// dependencies from R and RW accesses. It returns the time from the first
// submission to the completion of all tasks (StarPU's timing), after
// unregistering a.
func Factor[T linalg.Float](ctx context.Context, s *scheduler.Scheduler, cl *Codelets, a []T, n, b int, w io.Writer) (elapsed time.Duration, err error) {
	h, err := s.RegisterMatrix(a, n, n, scheduler.Named("A"))
	if err != nil {
		return 0, fmt.Errorf("cholesky: registering A: %w", err)
	}
	defer func() {
		if _, uerr := h.Unregister(ctx); uerr != nil && err == nil {
			err = fmt.Errorf("cholesky: unregistering A: %w", uerr)
		}
	}()
	tiles, err := h.Partition(scheduler.Blocks(b, b))
	if err != nil {
		return 0, fmt.Errorf("cholesky: partitioning A: %w", err)
	}
	elapsed, err = submitGraph(ctx, s, cl, tiles, w)
	if uerr := h.Unpartition(); uerr != nil && err == nil {
		err = fmt.Errorf("cholesky: unpartitioning A: %w", uerr)
	}
	return elapsed, err
}

// A TileMatrix holds the lower triangle of a symmetric matrix in tile
// layout: Tiles[i][j], j ≤ i, is tile (i, j), B×B elements stored
// contiguously by rows (leading dimension B). Each tile spans a few
// pages instead of B rows of a large matrix, which spares the kernels
// TLB and cache-associativity misses (the layout of PLASMA).
type TileMatrix[T linalg.Float] struct {
	NT, B int
	Tiles [][][]T
}

// ToTiles copies the lower triangle of the n×n row-major matrix a into
// tile layout.
func ToTiles[T linalg.Float](a []T, n, b int) *TileMatrix[T] {
	nt := n / b
	m := &TileMatrix[T]{NT: nt, B: b, Tiles: make([][][]T, nt)}
	for i := range nt {
		m.Tiles[i] = make([][]T, i+1)
		for j := 0; j <= i; j++ {
			t := make([]T, b*b)
			for r := range b {
				copy(t[r*b:(r+1)*b], a[(i*b+r)*n+j*b:])
			}
			m.Tiles[i][j] = t
		}
	}
	return m
}

// CopyTo copies the tiles into the lower triangle of the n×n row-major
// matrix a (n = NT·B); a's strict upper triangle of tiles is untouched.
func (m *TileMatrix[T]) CopyTo(a []T) {
	n, b := m.NT*m.B, m.B
	for i := range m.NT {
		for j := 0; j <= i; j++ {
			for r := range b {
				copy(a[(i*b+r)*n+j*b:(i*b+r)*n+j*b+b], m.Tiles[i][j][r*b:])
			}
		}
	}
}

// FactorTiles is Factor on a matrix in tile layout: each tile is
// registered as its own b×b matrix handle, factored in place by the same
// tasks in the same order, and unregistered.
func FactorTiles[T linalg.Float](ctx context.Context, s *scheduler.Scheduler, cl *Codelets, m *TileMatrix[T], w io.Writer) (elapsed time.Duration, err error) {
	hs := make([][]*scheduler.Handle, m.NT)
	defer func() {
		for _, row := range hs {
			for _, h := range row {
				if h == nil {
					continue
				}
				if _, uerr := h.Unregister(ctx); uerr != nil && err == nil {
					err = fmt.Errorf("cholesky: unregistering %v: %w", h, uerr)
				}
			}
		}
	}()
	for i := range m.NT {
		hs[i] = make([]*scheduler.Handle, i+1)
		for j := 0; j <= i; j++ {
			h, err := s.RegisterMatrix(m.Tiles[i][j], m.B, m.B)
			if err != nil {
				return 0, fmt.Errorf("cholesky: registering tile (%d,%d): %w", i, j, err)
			}
			hs[i][j] = h
		}
	}
	return submitGraph(ctx, s, cl, hs, w)
}

// submitGraph submits the tile tasks on the lower triangle of a grid of
// tile handles and waits for them; it returns the time from the first
// submission to the completion of the last task.
func submitGraph(ctx context.Context, s *scheduler.Scheduler, cl *Codelets, tiles [][]*scheduler.Handle, w io.Writer) (time.Duration, error) {
	nt := len(tiles)
	var bar *progress.Bar
	if w != nil {
		bar = progress.New(w, "cholesky tasks", taskCounts(nt).total())
	}
	done := scheduler.WithCallback(func(*scheduler.Task) {
		if bar != nil {
			bar.Add(1)
		}
	})
	t0 := time.Now()
	err := walkGraph(nt, func(c *scheduler.Codelet, prio int, at tile, acc ...access) error {
		args := make([]scheduler.Arg, 0, len(acc)+3)
		for _, a := range acc {
			if a.write {
				args = append(args, scheduler.RW(tiles[a.i][a.j]))
			} else {
				args = append(args, scheduler.R(tiles[a.i][a.j]))
			}
		}
		// CancelOn: once ctx ends (pzrun's SIGINT or SIGTERM), the tasks
		// not yet started do not run, and the wait below ends with the
		// tasks running then, not with the whole graph.
		args = append(args, scheduler.WithPriority(prio), scheduler.WithArg(at), done, scheduler.CancelOn(ctx))
		if err := s.Submit(ctx, c, args...); err != nil {
			return fmt.Errorf("cholesky: submitting %s%v: %w", c.Name, at, err)
		}
		return nil
	}, cl)
	// Wait even after a submission error: tasks already submitted use the data.
	werr := s.WaitAll(ctx)
	elapsed := time.Since(t0)
	if bar != nil {
		bar.Done()
	}
	if err == nil && werr != nil {
		err = fmt.Errorf("cholesky: %w", werr)
	}
	return elapsed, err
}

// tileTasks is the number of tasks of walkGraph that write a tile of
// column j: the j updates of steps 0..j-1 (SYRK on the diagonal, GEMM
// below it), then POTRF or TRSM.
func tileTasks(j int) int { return j + 1 }

// tile names a tile of the matrix: the task argument of every tile task.
type tile struct{ i, j int }

// access is one tile access of a tile task.
type access struct {
	i, j  int
	write bool
}

func rd(i, j int) access { return access{i, j, false} }
func rw(i, j int) access { return access{i, j, true} }

// walkGraph calls submit for every tile task of a Cholesky of nt x nt
// tiles, in the right-looking order of StarPU's cholesky_implicit, with
// its priorities (the longest remaining path first): for each step k,
// POTRF of tile (k,k), TRSM of the tiles below it, then SYRK and GEMM
// updates of the trailing matrix. The written tile comes last in acc.
func walkGraph(nt int, submit func(c *scheduler.Codelet, prio int, at tile, acc ...access) error, cl *Codelets) error {
	for k := range nt {
		if err := submit(cl.Potrf, 2*nt-2*k, tile{k, k}, rw(k, k)); err != nil {
			return err
		}
		for m := k + 1; m < nt; m++ {
			if err := submit(cl.Trsm, 2*nt-2*k-m, tile{m, k}, rd(k, k), rw(m, k)); err != nil {
				return err
			}
		}
		for j := k + 1; j < nt; j++ {
			if err := submit(cl.Syrk, 2*nt-2*k-2*j, tile{j, j}, rd(j, k), rw(j, j)); err != nil {
				return err
			}
			for i := j + 1; i < nt; i++ {
				if err := submit(cl.Gemm, 2*nt-2*k-i-j, tile{i, j}, rd(i, k), rd(j, k), rw(i, j)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
