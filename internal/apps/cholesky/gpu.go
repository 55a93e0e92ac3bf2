package cholesky

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/linalg"
	"github.com/pzgo/pz/scheduler"
)

// GPU runs the tile kernels on a scheduler's CUDA workers through cuBLAS
// and cuSOLVER, loaded at run time. The tiles are row-major; the
// libraries are column-major, so each kernel works on the transposes: a
// row-major lower factor L is a column-major upper one (U = Lᵀ), and
// row-major C := C − A·Bᵀ is column-major Cᵀ := Cᵀ − B·Aᵀ.
type GPU struct {
	blas   *cuda.BLAS
	solver *cuda.Solver

	mu      sync.Mutex
	workers map[int]*gpuWorker // by scheduler worker id
}

// gpuWorker is one CUDA worker's library handles and POTRF buffers,
// made on its first task (on its thread, bound to its stream).
type gpuWorker struct {
	c      *cuda.Context
	blas   *cuda.BLASHandle
	solver *cuda.SolverHandle
	work   cuda.DevicePtr // POTRF workspace
	lwork  int            // its size in bytes
	info   cuda.DevicePtr // POTRF's status int
}

// OpenGPU loads cuBLAS and cuSOLVER: from PZ_CUBLAS_LIBRARY and
// PZ_CUSOLVER_LIBRARY when set, else from the CUDA toolkit's sonames
// (cuda.DefaultBLASLibraries, cuda.DefaultSolverLibraries).
func OpenGPU() (*GPU, error) {
	b, err := cuda.OpenBLAS(os.Getenv("PZ_CUBLAS_LIBRARY"))
	if err != nil {
		return nil, fmt.Errorf("cholesky: GPU kernels need cuBLAS (set PZ_CUBLAS_LIBRARY to its path): %w", err)
	}
	sv, err := cuda.OpenSolver(os.Getenv("PZ_CUSOLVER_LIBRARY"))
	if err != nil {
		return nil, fmt.Errorf("cholesky: GPU kernels need cuSOLVER (set PZ_CUSOLVER_LIBRARY to its path): %w", err)
	}
	return &GPU{blas: b, solver: sv, workers: map[int]*gpuWorker{}}, nil
}

// worker returns the handles of the worker running c, making them on
// its first call.
func (g *GPU) worker(c *scheduler.CUDACall) (*gpuWorker, error) {
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
	w := &gpuWorker{c: c.Context, blas: bh, solver: sh, info: info}
	g.workers[c.Worker] = w
	return w, nil
}

// Close releases every worker's handles and buffers. Call it after the
// last task, before the scheduler closes (the handles live in its
// workers' contexts).
func (g *GPU) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	ctx := context.Background()
	var errs []error
	for id, w := range g.workers {
		errs = append(errs, w.blas.Destroy(ctx), w.solver.Destroy(ctx), w.c.Free(ctx, w.info))
		if w.work != 0 {
			errs = append(errs, w.c.Free(ctx, w.work))
		}
		delete(g.workers, id)
	}
	return errors.Join(errs...)
}

// potrf factors tile 0 in place: row-major lower L is column-major
// upper, A = UᵀU.
func gpuPotrf[T linalg.Float](g *GPU) scheduler.CUDAFunc {
	return func(c *scheduler.CUDACall) error {
		w, err := g.worker(c)
		if err != nil {
			return err
		}
		n, _, ld := c.Dims(0)
		a := c.Ptr(0)
		lw, err := cuda.PotrfWorkspace[T](w.solver, true, n, a, ld)
		if err != nil {
			return err
		}
		var z T
		size := max(lw, 1) * int(sizeOf(z))
		if size > w.lwork {
			ctx := context.Background()
			if w.work != 0 {
				if err := w.c.Free(ctx, w.work); err != nil {
					return err
				}
				w.work, w.lwork = 0, 0
			}
			if w.work, err = w.c.Alloc(ctx, size); err != nil {
				return fmt.Errorf("POTRF workspace of %d bytes: %w", size, err)
			}
			w.lwork = size
		}
		if err := cuda.Potrf[T](w.solver, true, n, a, ld, w.work, lw, w.info); err != nil {
			return err
		}
		// A copy to pageable memory returns once done, after POTRF.
		var info [4]byte
		if err := c.Context.CopyDtoHAsync(context.Background(), info[:], w.info, c.Stream); err != nil {
			return err
		}
		if i := int32(binary.NativeEndian.Uint32(info[:])); i != 0 {
			return fmt.Errorf("tile %v: %w: leading minor %d (cuSOLVER)", c.Arg, linalg.ErrNotPositiveDefinite, i)
		}
		return nil
	}
}

// gpuTrsm computes A := A·L⁻ᵀ (row-major; A is m×n): column-major
// Aᵀ := U⁻ᵀ·Aᵀ with U = Lᵀ.
func gpuTrsm[T linalg.Float](g *GPU) scheduler.CUDAFunc {
	return func(c *scheduler.CUDACall) error {
		w, err := g.worker(c)
		if err != nil {
			return err
		}
		_, _, ldl := c.Dims(0)
		m, n, lda := c.Dims(1)
		return cuda.Trsm[T](w.blas, false, true, true, n, m, 1, c.Ptr(0), ldl, c.Ptr(1), lda)
	}
}

// gpuSyrk computes the lower triangle of C := C − A·Aᵀ (row-major; A is
// n×k): the upper triangle of column-major C := C − Bᵀ·B with B = Aᵀ.
func gpuSyrk[T linalg.Float](g *GPU) scheduler.CUDAFunc {
	return func(c *scheduler.CUDACall) error {
		w, err := g.worker(c)
		if err != nil {
			return err
		}
		_, k, lda := c.Dims(0)
		n, _, ldc := c.Dims(1)
		return cuda.Syrk[T](w.blas, true, true, n, k, -1, c.Ptr(0), lda, 1, c.Ptr(1), ldc)
	}
}

// gpuGemm computes C := C − A·Bᵀ (row-major; A m×k, B n×k): column-major
// Cᵀ := Cᵀ − B·Aᵀ.
func gpuGemm[T linalg.Float](g *GPU) scheduler.CUDAFunc {
	return func(c *scheduler.CUDACall) error {
		w, err := g.worker(c)
		if err != nil {
			return err
		}
		_, k, lda := c.Dims(0)
		_, _, ldb := c.Dims(1)
		m, n, ldc := c.Dims(2)
		return cuda.Gemm[T](w.blas, true, false, n, m, k, -1, c.Ptr(1), ldb, c.Ptr(0), lda, 1, c.Ptr(2), ldc)
	}
}

func sizeOf[T linalg.Float](T) uintptr {
	var z T
	if _, ok := any(z).(float32); ok {
		return 4
	}
	return 8
}

// WithGPU gives the codelets of cl CUDA implementations that run on g
// (in precision T, as NewCodelets[T] made cl), and returns cl.
func WithGPU[T linalg.Float](cl *Codelets, g *GPU) *Codelets {
	if g == nil {
		return cl
	}
	cl.Potrf.CUDA = gpuPotrf[T](g)
	cl.Trsm.CUDA = gpuTrsm[T](g)
	cl.Syrk.CUDA = gpuSyrk[T](g)
	cl.Gemm.CUDA = gpuGemm[T](g)
	return cl
}

// hasGPUs reports whether s has CUDA workers.
func hasGPUs(s *scheduler.Scheduler) bool {
	for _, w := range s.Workers() {
		if w.Kind == scheduler.CUDAWorker {
			return true
		}
	}
	return false
}
