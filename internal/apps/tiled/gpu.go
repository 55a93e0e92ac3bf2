package tiled

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

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
	workers map[int]*GPUWorker // by scheduler worker id
}

// A GPUWorker is one CUDA worker's library handles, bound to its stream,
// and its buffers, made on its first task.
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
	return &GPU{blas: b, solver: sv, workers: map[int]*GPUWorker{}}, nil
}

// Worker returns the handles of the worker running c, making them on its
// first call.
func (g *GPU) Worker(c *scheduler.CUDACall) (*GPUWorker, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w := g.workers[c.Worker]; w != nil {
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
	g.workers[c.Worker] = w
	return w, nil
}

// Workspace returns device memory of at least n bytes, the worker's own,
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

// Info is an int32 of device memory, the worker's own (cuSOLVER's
// devInfo).
func (w *GPUWorker) Info() cuda.DevicePtr { return w.info }

// Close releases every worker's handles and buffers. Call it after the
// last task, before the scheduler closes (the handles live in its
// workers' contexts).
func (g *GPU) Close() error {
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
