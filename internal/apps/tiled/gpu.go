package tiled

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/linalg"
	"github.com/pzgo/pz/scheduler"
)

// GPU runs tile kernels on a scheduler's CUDA workers through cuBLAS and
// cuSOLVER, loaded at run time. The tiles are row-major; the libraries
// are column-major, so each kernel works on the transposes: a row-major
// lower factor L is a column-major upper one (U = Lᵀ), and row-major
// C := C − A·Bᵀ is column-major Cᵀ := Cᵀ − B·Aᵀ.
type GPU struct {
	blas   *cuda.BLAS
	solver *cuda.Solver

	mu      sync.Mutex
	workers map[*cuda.Stream]*GPUWorker // by the stream of the task
}

// A GPUWorker is the library handles bound to one stream of a CUDA
// worker, and their buffers, made on the stream's first task. A worker
// has a stream per task it may have in flight
// (scheduler.WithCUDAPipeline), and tasks in flight at once must not
// share a workspace.
type GPUWorker struct {
	// BLAS and Solver are the worker's cuBLAS and cuSOLVER handles.
	BLAS   *cuda.BLASHandle
	Solver *cuda.SolverHandle

	c     *cuda.Context
	work  cuda.DevicePtr // Workspace
	nwork int            // its size in bytes
	info  cuda.DevicePtr // Info
}

// OpenGPU loads cuBLAS and cuSOLVER: from PZ_CUBLAS_LIBRARY and
// PZ_CUSOLVER_LIBRARY when set, else from the CUDA toolkit's sonames
// (cuda.DefaultBLASLibraries, cuda.DefaultSolverLibraries).
func OpenGPU() (*GPU, error) {
	b, err := cuda.OpenBLAS(os.Getenv("PZ_CUBLAS_LIBRARY"))
	if err != nil {
		return nil, fmt.Errorf("GPU kernels need cuBLAS (set PZ_CUBLAS_LIBRARY to its path): %w", err)
	}
	sv, err := cuda.OpenSolver(os.Getenv("PZ_CUSOLVER_LIBRARY"))
	if err != nil {
		return nil, fmt.Errorf("GPU kernels need cuSOLVER (set PZ_CUSOLVER_LIBRARY to its path): %w", err)
	}
	return &GPU{blas: b, solver: sv, workers: map[*cuda.Stream]*GPUWorker{}}, nil
}

// AttachGPU opens the GPU libraries (OpenGPU) when s has CUDA workers;
// it returns nil when s has none. Close the GPU after the last task,
// before s closes: the handles live in its workers' contexts.
func AttachGPU(s *scheduler.Scheduler) (*GPU, error) {
	if !HasGPUs(s) {
		return nil, nil
	}
	return OpenGPU()
}

// Worker returns the handles for c's stream, making them on its first
// task.
func (g *GPU) Worker(c *scheduler.CUDACall) (*GPUWorker, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w := g.workers[c.Stream]; w != nil {
		return w, nil
	}
	ctx := context.Background()
	bh, err := g.blas.NewHandle(ctx, c.Context, c.Stream)
	if err != nil {
		return nil, err
	}
	sh, err := g.solver.NewHandle(ctx, c.Context, c.Stream)
	if err != nil {
		return nil, errors.Join(err, bh.Destroy(ctx))
	}
	info, err := c.Context.Alloc(ctx, 4)
	if err != nil {
		return nil, errors.Join(err, bh.Destroy(ctx), sh.Destroy(ctx))
	}
	w := &GPUWorker{BLAS: bh, Solver: sh, c: c.Context, info: info}
	g.workers[c.Stream] = w
	return w, nil
}

// Workspace returns device memory of at least n bytes, the stream's own,
// kept between its tasks.
func (w *GPUWorker) Workspace(n int) (cuda.DevicePtr, error) {
	if n <= w.nwork {
		return w.work, nil
	}
	ctx := context.Background()
	if w.work != 0 {
		if err := w.c.Free(ctx, w.work); err != nil {
			return 0, err
		}
		w.work, w.nwork = 0, 0
	}
	p, err := w.c.Alloc(ctx, n)
	if err != nil {
		return 0, fmt.Errorf("workspace of %d bytes: %w", n, err)
	}
	w.work, w.nwork = p, n
	return p, nil
}

// Info is an int32 of device memory, the stream's own (cuSOLVER's
// devInfo).
func (w *GPUWorker) Info() cuda.DevicePtr { return w.info }

// Close releases every worker's handles and buffers (nothing for a nil
// GPU). Call it after the last task, before the scheduler closes (the
// handles live in its workers' contexts).
func (g *GPU) Close() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	ctx := context.Background()
	var errs []error
	for id, w := range g.workers {
		errs = append(errs, w.BLAS.Destroy(ctx), w.Solver.Destroy(ctx), w.c.Free(ctx, w.info))
		if w.work != 0 {
			errs = append(errs, w.c.Free(ctx, w.work))
		}
		delete(g.workers, id)
	}
	return errors.Join(errs...)
}

// GemmCUDA is the CUDA implementation of the tile update C := C − A·Bᵀ
// (row-major; accesses R(A) m×k, R(B) n×k, RW(C) m×n): column-major
// Cᵀ := Cᵀ − B·Aᵀ, one cuBLAS GEMM.
func GemmCUDA[T linalg.Float](g *GPU) scheduler.CUDAFunc {
	return func(c *scheduler.CUDACall) error {
		w, err := g.Worker(c)
		if err != nil {
			return err
		}
		_, k, lda := c.Dims(0)
		_, _, ldb := c.Dims(1)
		m, n, ldc := c.Dims(2)
		return cuda.Gemm[T](w.BLAS, true, false, n, m, k, -1, c.Ptr(1), ldb, c.Ptr(0), lda, 1, c.Ptr(2), ldc)
	}
}

// HasGPUs reports whether s has CUDA workers.
func HasGPUs(s *scheduler.Scheduler) bool {
	for _, w := range s.Workers() {
		if w.Kind == scheduler.CUDAWorker {
			return true
		}
	}
	return false
}

// Reference is the rate of one vendor-library call on the whole matrix
// (cuSOLVER's POTRF, cuBLAS's GEMM) on the first GPU, measured in the
// same run as the tiled factorization, and the tiled run's rate as a
// fraction of it; the apps' JSON prints it as
//
//	gpu_reference_gflops   the one call's GFLOP/s (absent without -cuda-reference)
//	gpu_reference_ratio    gflops / gpu_reference_gflops
type Reference struct {
	GFlops float64 `json:"gpu_reference_gflops,omitempty"`
	Ratio  float64 `json:"gpu_reference_ratio,omitempty"`
}

// String is ", one cuSOLVER/cuBLAS call X GFLOP/s (tiled Y×)", or "".
func (r Reference) String() string {
	if r.GFlops == 0 {
		return ""
	}
	return fmt.Sprintf(", one library call on the GPU %.2f GFLOP/s (tiled %.2f×)", r.GFlops, r.Ratio)
}

// NewReference is the Reference of a call that took d for flops, beside a
// tiled run at gflops.
func NewReference(flops float64, d time.Duration, gflops float64) Reference {
	r := Reference{GFlops: GFlops(flops, d)}
	if r.GFlops > 0 {
		r.Ratio = gflops / r.GFlops
	}
	return r
}

// onGPU runs fn on GPU 0 of the driver PZ_CUDA_LIBRARY names (else the
// system's), with a context of its own, a stream and the libraries.
func onGPU(ctx context.Context, fn func(c *cuda.Context, s *cuda.Stream, g *GPU) error) error {
	d, err := cuda.OpenEnv(nil)
	if err != nil {
		return err
	}
	if d == nil {
		return fmt.Errorf("%w: a GPU reference needs a CUDA driver", ErrBadOptions)
	}
	g, err := OpenGPU()
	if err != nil {
		return err
	}
	c, err := d.NewContext(ctx, 0)
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := c.NewStream(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = s.Destroy(context.Background()) }()
	return fn(c, s, g)
}

// toDevice copies x into a new allocation (freed again if the copy
// fails).
func toDevice[T linalg.Float](ctx context.Context, c *cuda.Context, x []T) (cuda.DevicePtr, error) {
	b := cuda.Bytes(x)
	p, err := c.Alloc(ctx, len(b))
	if err != nil {
		return 0, err
	}
	if err := c.CopyHtoD(ctx, p, b); err != nil {
		return 0, errors.Join(err, c.Free(ctx, p))
	}
	return p, nil
}

// timeOnStream times queue (one library call) from the host: the stream
// is idle before, and waited for after.
func timeOnStream(ctx context.Context, s *cuda.Stream, queue func() error) (time.Duration, error) {
	if err := s.Synchronize(context.Background()); err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := queue(); err != nil {
		return 0, err
	}
	if err := s.Synchronize(context.Background()); err != nil {
		return 0, err
	}
	return time.Since(t0), ctx.Err()
}

// ReferenceCholesky times one cuSOLVER POTRF of the n×n row-major SPD
// matrix a (its lower triangle: a column-major upper one) on the first
// GPU, after one untimed call on the same data.
func ReferenceCholesky[T linalg.Float](ctx context.Context, a []T, n int) (time.Duration, error) {
	var timed time.Duration
	err := onGPU(ctx, func(c *cuda.Context, s *cuda.Stream, g *GPU) error {
		sh, err := g.solver.NewHandle(ctx, c, s)
		if err != nil {
			return err
		}
		defer func() { _ = sh.Destroy(context.Background()) }()
		p, err := toDevice(ctx, c, a)
		if err != nil {
			return fmt.Errorf("the whole matrix on the GPU: %w", err)
		}
		defer func() { _ = c.Free(context.Background(), p) }()
		lw, err := cuda.PotrfWorkspace[T](sh, true, n, p, n)
		if err != nil {
			return err
		}
		var z T
		work, err := c.Alloc(ctx, max(lw, 1)*int(unsafe.Sizeof(z)))
		if err != nil {
			return err
		}
		defer func() { _ = c.Free(context.Background(), work) }()
		info, err := c.Alloc(ctx, 4)
		if err != nil {
			return err
		}
		defer func() { _ = c.Free(context.Background(), info) }()
		for round := range 2 { // the second call is timed
			if round > 0 {
				if err := c.CopyHtoD(ctx, p, cuda.Bytes(a)); err != nil { // A again
					return err
				}
			}
			d, err := timeOnStream(ctx, s, func() error { return cuda.Potrf[T](sh, true, n, p, n, work, lw, info) })
			if err != nil {
				return err
			}
			var st [4]byte
			if err := c.CopyDtoH(ctx, st[:], info); err != nil {
				return err
			}
			if st != [4]byte{} {
				return fmt.Errorf("cuSOLVER POTRF of the whole matrix: %w", linalg.ErrNotPositiveDefinite)
			}
			timed = d
		}
		return nil
	})
	return timed, err
}

// ReferenceGemm times one cuBLAS GEMM C −= A·Bᵀ of n×n row-major
// matrices on the first GPU, after one untimed call.
func ReferenceGemm[T linalg.Float](ctx context.Context, a, b, c0 []T, n int) (time.Duration, error) {
	var timed time.Duration
	err := onGPU(ctx, func(c *cuda.Context, s *cuda.Stream, g *GPU) error {
		bh, err := g.blas.NewHandle(ctx, c, s)
		if err != nil {
			return err
		}
		defer func() { _ = bh.Destroy(context.Background()) }()
		var ptrs []cuda.DevicePtr
		defer func() {
			for _, p := range ptrs {
				_ = c.Free(context.Background(), p)
			}
		}()
		for _, x := range [][]T{a, b, c0} {
			p, err := toDevice(ctx, c, x)
			if err != nil {
				return fmt.Errorf("the matrices on the GPU: %w", err)
			}
			ptrs = append(ptrs, p)
		}
		for range 2 { // the second call is timed
			d, err := timeOnStream(ctx, s, func() error {
				return cuda.Gemm[T](bh, true, false, n, n, n, -1, ptrs[1], n, ptrs[0], n, 1, ptrs[2], n)
			})
			if err != nil {
				return err
			}
			timed = d
		}
		return nil
	})
	return timed, err
}

// Pin page-locks the arrays for s's GPUs (scheduler.PinHost), so that
// their tiles move to and from the GPUs asynchronously at the bus's full
// speed; without GPUs, or with pageable set (pzrun -pageable, to measure
// the difference), it does nothing. unpin undoes it.
func Pin[T linalg.Float](s *scheduler.Scheduler, pageable bool, xs ...[]T) (unpin func() error, err error) {
	var done [][]T
	unpin = func() error {
		var errs []error
		for _, x := range done {
			errs = append(errs, scheduler.UnpinHost(s, x))
		}
		done = nil
		return errors.Join(errs...)
	}
	if pageable || !HasGPUs(s) {
		return unpin, nil
	}
	for _, x := range xs {
		if err := scheduler.PinHost(s, x); err != nil {
			return nil, errors.Join(err, unpin())
		}
		done = append(done, x)
	}
	return unpin, nil
}
