package cholesky

import (
	"context"
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/apps/tiled"
	"github.com/pzgo/pz/internal/linalg"
	"github.com/pzgo/pz/scheduler"
)

// The CUDA implementations of the tile kernels, through cuBLAS and
// cuSOLVER (tiled.GPU): row-major tiles reach the column-major libraries
// as their transposes.

// gpuPotrf factors tile 0 in place: row-major lower L is column-major
// upper U, A = UᵀU.
func gpuPotrf[T linalg.Float](g *tiled.GPU) scheduler.CUDAFunc {
	return func(c *scheduler.CUDACall) error {
		w, err := g.Worker(c)
		if err != nil {
			return err
		}
		n, _, ld := c.Dims(0)
		a := c.Ptr(0)
		lw, err := cuda.PotrfWorkspace[T](w.Solver, true, n, a, ld)
		if err != nil {
			return err
		}
		var z T
		work, err := w.Workspace(max(lw, 1) * int(unsafe.Sizeof(z)))
		if err != nil {
			return err
		}
		if err := cuda.Potrf[T](w.Solver, true, n, a, ld, work, lw, w.Info()); err != nil {
			return err
		}
		// A copy to pageable memory returns once done, after POTRF.
		var info [4]byte
		if err := c.Context.CopyDtoHAsync(context.Background(), info[:], w.Info(), c.Stream); err != nil {
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
func gpuTrsm[T linalg.Float](g *tiled.GPU) scheduler.CUDAFunc {
	return func(c *scheduler.CUDACall) error {
		w, err := g.Worker(c)
		if err != nil {
			return err
		}
		_, _, ldl := c.Dims(0)
		m, n, lda := c.Dims(1)
		return cuda.Trsm[T](w.BLAS, false, true, true, n, m, 1, c.Ptr(0), ldl, c.Ptr(1), lda)
	}
}

// gpuSyrk computes the lower triangle of C := C − A·Aᵀ (row-major; A is
// n×k): the upper triangle of column-major C := C − Bᵀ·B with B = Aᵀ.
func gpuSyrk[T linalg.Float](g *tiled.GPU) scheduler.CUDAFunc {
	return func(c *scheduler.CUDACall) error {
		w, err := g.Worker(c)
		if err != nil {
			return err
		}
		_, k, lda := c.Dims(0)
		n, _, ldc := c.Dims(1)
		return cuda.Syrk[T](w.BLAS, true, true, n, k, -1, c.Ptr(0), lda, 1, c.Ptr(1), ldc)
	}
}

// WithGPU gives the codelets of cl CUDA implementations that run on g
// (in precision T, as NewCodelets[T] made cl), and returns cl.
func WithGPU[T linalg.Float](cl *Codelets, g *tiled.GPU) *Codelets {
	if g == nil {
		return cl
	}
	cl.Potrf.CUDA = gpuPotrf[T](g)
	cl.Trsm.CUDA = gpuTrsm[T](g)
	cl.Syrk.CUDA = gpuSyrk[T](g)
	cl.Gemm.CUDA = tiled.GemmCUDA[T](g)
	return cl
}
