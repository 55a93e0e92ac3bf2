package gemm

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/pzgo/pz/internal/apps/tiled"
	"github.com/pzgo/pz/internal/linalg"
	"github.com/pzgo/pz/internal/progress"
	"github.com/pzgo/pz/scheduler"
)

// Options configure one run. The zero value of each optional field
// selects its default.
type Options struct {
	// N is the order of the square matrices; it must be a multiple of
	// Block.
	N int
	// Block is the tile size b: C is cut into (N/b)² tiles, A and B into
	// N/b panels of b rows.
	Block int
	// Precision is 32 (float32, the default) or 64 (float64).
	Precision int
	// Policy is the scheduling policy's name; "" takes the scheduler's
	// default.
	Policy string
	// Workers is the number of CPU workers; 0 takes the scheduler's
	// default.
	Workers int
	// Check compares sampled entries of the result with float64 dot
	// products.
	Check bool
	// Seed selects the random matrices; 0 means 1.
	Seed uint64
	// Warmup is the number of untimed products run first on the same
	// scheduler (they calibrate dmda's performance models).
	Warmup int
	// SchedulerOptions are passed to scheduler.New after the policy and
	// worker options.
	SchedulerOptions []scheduler.Option
	// GridP and GridQ are the process grid of RunDist (P*Q ranks); zero
	// takes the most square grid (dist.Grid).
	GridP, GridQ int
	// GPUReference also times one cuBLAS GEMM of the whole matrices on
	// the first GPU (pzrun -cuda-reference), reported beside the tiled
	// rate.
	GPUReference bool
	// Pageable leaves the matrices in pageable memory. With GPUs they
	// are otherwise page-locked for the run (scheduler.PinHost, not
	// timed), so that their tiles move asynchronously at the bus's full
	// speed.
	Pageable bool
}

// A Result is the outcome of one run. Its JSON form is printed by
// `pzrun gemm --json`; field names are a stable interface:
//
//	app          "gemm"
//	n, block     matrix order and tile size
//	precision    32 or 64
//	policy       scheduling policy that ran
//	workers      workers: the CPU workers and one per device
//	backend      tile kernels: "gonum" or "openblas"
//	tasks        tile tasks: (n/block)², each C_ij −= A_i·B_jᵀ over the full n
//	seconds      wall time from the first submission to the end of the last task
//	gflops       2n³ / seconds / 10⁹
//	seq_gflops   one worker's rate for one task's kernel (block×block×n), measured in this run
//	efficiency   gflops / (workers × seq_gflops)
//	checked      whether sampled entries were compared
//	max_rel_err  largest |c − ref| / (Σ_k |a_ik·b_jk| + |c0|) over the samples (0 unless checked)
//	ranks        ranks that computed the product (1: one rank's scheduler)
//	grid         the P x Q process grid of C's tiles, e.g. "1x2" (ranks > 1 only)
//	messages     panels and tiles sent between ranks
//	bytes_sent   their bytes
//	devices, device_tasks, device_bytes, evictions, write_backs
//	             the devices' figures (tiled.Devices; 0 without devices)
//	gpu_reference_gflops, gpu_reference_ratio
//	             one library call on the whole matrix on a GPU, and
//	             gflops over it (tiled.Reference; absent unless asked)
//
// With several ranks workers is per rank and efficiency divides by
// ranks × workers.
type Result struct {
	App        string  `json:"app"`
	N          int     `json:"n"`
	Block      int     `json:"block"`
	Precision  int     `json:"precision"`
	Policy     string  `json:"policy"`
	Workers    int     `json:"workers"`
	Backend    string  `json:"backend"`
	Tasks      int     `json:"tasks"`
	Seconds    float64 `json:"seconds"`
	GFlops     float64 `json:"gflops"`
	SeqGFlops  float64 `json:"seq_gflops"`
	Efficiency float64 `json:"efficiency"`
	Checked    bool    `json:"checked"`
	MaxRelErr  float64 `json:"max_rel_err"`
	Ranks      int     `json:"ranks"`
	Grid       string  `json:"grid,omitempty"`
	Messages   int64   `json:"messages"`
	BytesSent  int64   `json:"bytes_sent"`
	tiled.Devices
	tiled.Reference
}

// String formats r as one human-readable line.
func (r *Result) String() string {
	ranks := ""
	if r.Ranks > 1 {
		ranks = fmt.Sprintf(" ranks=%d grid=%s", r.Ranks, r.Grid)
	}
	s := fmt.Sprintf("gemm n=%d b=%d fp%d %s%s policy=%s workers=%d tasks=%d: %.3f s, %.2f GFLOP/s, efficiency %.2f (sequential kernel %.2f GFLOP/s)",
		r.N, r.Block, r.Precision, r.Backend, ranks, r.Policy, r.Workers, r.Tasks, r.Seconds, r.GFlops, r.Efficiency, r.SeqGFlops)
	if r.Ranks > 1 {
		s += fmt.Sprintf(", %d panels and tiles sent (%.1f MiB)", r.Messages, float64(r.BytesSent)/(1<<20))
	}
	s += r.Devices.String() + r.Reference.String()
	if r.Checked {
		s += fmt.Sprintf(", max relative error %.3g", r.MaxRelErr)
	}
	return s
}

// Tolerance returns a bound on MaxRelErr for a correct product with
// inner dimension n: the classical dot-product error bound n·u
// (Higham, Thm. 3.1) with u the unit roundoff, times 2 for the final
// subtraction.
func Tolerance(precision, n int) float64 {
	u := 0x1p-53
	if precision == 32 {
		u = 0x1p-24
	}
	return 2 * float64(n+1) * u
}

// samples is the number of entries of C checked against float64 dot
// products: enough to catch a wrong tile of any size, O(samples·n) work.
const samples = 4096

// Run generates seeded random A, B and C, times one task's kernel on one
// worker, computes C −= A·Bᵀ with one tile task per b×b tile of C on a
// new scheduler, and, with opts.Check, compares sampled entries.
func Run(ctx context.Context, opts Options, progress io.Writer) (*Result, error) {
	if err := tiled.Prepare(opts.N, opts.Block, &opts.Precision, &opts.Seed, opts.Workers, opts.Warmup); err != nil {
		return nil, fmt.Errorf("gemm: %w", err)
	}
	if err := checkMemory(opts, tiled.AvailableMemory(ctx)); err != nil {
		return nil, err
	}
	if opts.Precision == 32 {
		return run[float32](ctx, opts, progress)
	}
	return run[float64](ctx, opts, progress)
}

// checkMemory refuses a one-rank run whose matrices (A, B, C and C's
// starting copy) do not fit in the available memory.
func checkMemory(opts Options, available uint64) error {
	need := 4 * tiled.MatrixBytes(opts.N, opts.Precision)
	what := fmt.Sprintf("4 matrices of %d×%d fp%d values: A, B, C and C's start", opts.N, opts.N, opts.Precision)
	if err := tiled.CheckMemory(need, what, available); err != nil {
		return fmt.Errorf("gemm: n=%d: %w", opts.N, err)
	}
	return nil
}

func run[T linalg.Float](ctx context.Context, opts Options, w io.Writer) (_ *Result, err error) {
	n, b := opts.N, opts.Block
	a := tiled.Random[T](n, n, opts.Seed)
	bm := tiled.Random[T](n, n, opts.Seed+1)
	c0 := tiled.Random[T](n, n, opts.Seed+2)
	c := make([]T, len(c0))

	sopts := tiled.SchedulerOptions(opts.Policy, opts.Workers, opts.SchedulerOptions)
	s, err := scheduler.New(ctx, sopts...)
	if err != nil {
		return nil, fmt.Errorf("gemm: %w", err)
	}
	defer tiled.Release(&err, "gemm: closing the scheduler", s.Close)

	// One task's kernel on a b×n panel pair, timed on this goroutine.
	tmp := make([]T, b*b)
	kt, err := tiled.TimeKernel(ctx, 3, 50*time.Millisecond, nil, func() { linalg.Gemm(b, b, n, a, n, bm, n, tmp, b) })
	if err != nil {
		return nil, fmt.Errorf("gemm: %w", err)
	}
	nt := n / b
	seq := float64(nt*nt) * kt.Seconds()

	cl := NewCodelet[T]()
	g, err := tiled.AttachGPU(s) // nil without GPU workers
	if err != nil {
		return nil, fmt.Errorf("gemm: %w", err)
	}
	// Before the scheduler closes: the handles live in its workers' contexts.
	defer tiled.Release(&err, "gemm: releasing the GPU libraries", g.Close)
	if g != nil {
		cl.CUDA = tiled.GemmCUDA[T](g)
	}
	unpin, err := tiled.Pin(s, opts.Pageable, a, bm, c)
	if err != nil {
		return nil, fmt.Errorf("gemm: %w", err)
	}
	defer tiled.Release(&err, "gemm", unpin) // before the scheduler closes
	var elapsed time.Duration
	var dev tiled.Devices
	for it := 0; it <= opts.Warmup; it++ {
		dev = tiled.DeviceFigures(s)
		copy(c, c0)
		elapsed, err = Multiply(ctx, s, cl, a, bm, c, n, b, w)
		if err != nil {
			return nil, err
		}
	}
	flops := linalg.GemmFlops(n, n, n)
	res := &Result{
		App: "gemm", N: n, Block: b, Precision: opts.Precision,
		Policy: s.Policy(), Workers: len(s.Workers()), Backend: linalg.Backend,
		Tasks: nt * nt, Seconds: elapsed.Seconds(), GFlops: tiled.GFlops(flops, elapsed),
		SeqGFlops: tiled.GFlops(linalg.GemmFlops(b, b, n), kt), Ranks: 1,
		Devices: tiled.DeviceFigures(s).Sub(dev),
	}
	res.Pinned = !opts.Pageable && tiled.HasGPUs(s)
	if seq > 0 {
		res.Efficiency = seq / (float64(res.Workers) * elapsed.Seconds())
	}
	if opts.Check {
		res.Checked, res.MaxRelErr = true, maxRelErr(a, bm, c0, c, n, opts.Seed)
	}
	if opts.GPUReference {
		d, err := tiled.ReferenceGemm[T](ctx, a, bm, c0, n)
		if err != nil {
			return nil, fmt.Errorf("gemm: GPU reference: %w", err)
		}
		res.Reference = tiled.NewReference(flops, d, res.GFlops)
	}
	return res, nil
}

// maxRelErr compares seeded samples of c with c0 − A·Bᵀ computed in
// float64, relative to the magnitude of the terms summed.
func maxRelErr[T linalg.Float](a, b, c0, c []T, n int, seed uint64) float64 {
	rng := rand.New(rand.NewPCG(seed, 7))
	worst := 0.0
	for range min(samples, n*n) {
		i, j := rng.IntN(n), rng.IntN(n)
		ref, mag := float64(c0[i*n+j]), math.Abs(float64(c0[i*n+j]))
		for k := range n {
			p := float64(a[i*n+k]) * float64(b[j*n+k])
			ref -= p
			mag += math.Abs(p)
		}
		if e := math.Abs(float64(c[i*n+j])-ref) / mag; !(e <= worst) { // NaN-safe
			worst = e
		}
	}
	return worst
}

// NewCodelet returns the tile task of the product in precision T: with
// accesses R(A panel i), R(B panel j), RW(C tile ij) it computes
// C_ij −= A_i·B_jᵀ. It has a history performance model named
// "gemm_tile_f32" or "gemm_tile_f64".
func NewCodelet[T linalg.Float]() *scheduler.Codelet {
	name := "gemm_tile_f64"
	var z T
	if _, ok := any(z).(float32); ok {
		name = "gemm_tile_f32"
	}
	return &scheduler.Codelet{
		Name:  name,
		Model: scheduler.HistoryModel(name),
		CPU: func(c *scheduler.Call) error {
			a, b, t := scheduler.MatrixOf[T](c, 0), scheduler.MatrixOf[T](c, 1), scheduler.MatrixOf[T](c, 2)
			linalg.Gemm(t.Rows, t.Cols, a.Cols, a.Data, a.Stride, b.Data, b.Stride, t.Data, t.Stride)
			return nil
		},
		Flops: func(t *scheduler.Task) float64 {
			a, c := t.Access[0].Handle, t.Access[2].Handle
			return linalg.GemmFlops(c.Rows(), c.Cols(), a.Cols())
		},
	}
}

// Multiply computes C −= A·Bᵀ for n×n row-major matrices as tile tasks on
// s, after StarPU's mult example: A and B are cut into panels of b rows,
// C into b×b tiles, and one task per tile of C reads a panel of each. It
// returns the time from the first submission to the completion of all
// tasks, after unregistering the matrices.
func Multiply[T linalg.Float](ctx context.Context, s *scheduler.Scheduler, cl *scheduler.Codelet, a, b, c []T, n, bs int, w io.Writer) (elapsed time.Duration, err error) {
	var hs []*scheduler.Handle
	defer func() {
		for _, h := range hs {
			if uerr := h.Unpartition(); uerr != nil && err == nil {
				err = fmt.Errorf("gemm: unpartitioning %v: %w", h, uerr)
			}
			if _, uerr := h.Unregister(ctx); uerr != nil && err == nil {
				err = fmt.Errorf("gemm: unregistering %v: %w", h, uerr)
			}
		}
	}()
	part := func(name string, data []T, rows, cols int) ([][]*scheduler.Handle, error) {
		h, err := s.RegisterMatrix(data, n, n, scheduler.Named(name))
		if err != nil {
			return nil, fmt.Errorf("gemm: registering %s: %w", name, err)
		}
		hs = append(hs, h)
		t, err := h.Partition(scheduler.Blocks(rows, cols))
		if err != nil {
			return nil, fmt.Errorf("gemm: partitioning %s: %w", name, err)
		}
		return t, nil
	}
	ap, err := part("A", a, bs, n)
	if err != nil {
		return 0, err
	}
	bp, err := part("B", b, bs, n)
	if err != nil {
		return 0, err
	}
	ct, err := part("C", c, bs, bs)
	if err != nil {
		return 0, err
	}
	nt := n / bs
	var bar *progress.Bar
	if w != nil {
		bar = progress.New(w, "gemm tasks", nt*nt)
	}
	t0 := time.Now()
	for i := range nt {
		for j := range nt {
			// CancelOn: once ctx ends (pzrun's SIGINT or SIGTERM), the
			// tasks not yet started do not run, and the wait below ends
			// with the tasks running then, not with every tile of C.
			err = s.Submit(ctx, cl, scheduler.R(ap[i][0]), scheduler.R(bp[j][0]), scheduler.RW(ct[i][j]),
				scheduler.WithCallback(func(*scheduler.Task) {
					if bar != nil {
						bar.Add(1)
					}
				}), scheduler.CancelOn(ctx))
			if err != nil {
				err = fmt.Errorf("gemm: submitting tile (%d,%d): %w", i, j, err)
				break
			}
		}
		if err != nil {
			break
		}
	}
	// Wait even after a submission error: tasks already submitted use the data.
	werr := s.WaitAll(ctx)
	elapsed = time.Since(t0)
	if bar != nil {
		bar.Done()
	}
	if err == nil && werr != nil {
		err = fmt.Errorf("gemm: %w", werr)
	}
	return elapsed, err
}
