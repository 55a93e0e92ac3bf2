package cuda

import (
	"context"
	"errors"
	"fmt"

	"github.com/ebitengine/purego"
)

// Vendor libraries, loaded at run time like the driver: cuBLAS for the
// BLAS kernels of tiled algorithms, cuSOLVER for the factorizations. The
// build needs neither; a machine without them gets an error wrapping
// ErrNoLibrary from OpenBLAS/OpenSolver.

// DefaultBLASLibraries and DefaultSolverLibraries are the sonames tried,
// in order, when no library is named (CUDA 12 ships libcublas.so.12 and
// libcusolver.so.11).
var (
	DefaultBLASLibraries   = []string{"libcublas.so.12", "libcublas.so.11", "libcublas.so"}
	DefaultSolverLibraries = []string{"libcusolver.so.11", "libcusolver.so.12", "libcusolver.so"}
)

// ErrNoLibrary is wrapped by OpenBLAS and OpenSolver when the library
// cannot be loaded.
var ErrNoLibrary = errors.New("cuda: library not available")

// Float is the element type of the BLAS and solver calls.
type Float interface{ float32 | float64 }

// A LibraryStatus is a cuBLAS or cuSOLVER status code, as the library
// named in the error returned it.
type LibraryStatus struct {
	Library string // "cublas" or "cusolver"
	Call    string // the function, e.g. "cublasDgemm_v2"
	Code    int32
}

// Error names the library, the call and the status.
func (e *LibraryStatus) Error() string {
	return fmt.Sprintf("%s: %s failed: %s (%d)", e.Library, e.Call, statusName(e.Library, e.Code), e.Code)
}

func statusName(lib string, code int32) string {
	blas := map[int32]string{1: "NOT_INITIALIZED", 3: "ALLOC_FAILED", 7: "INVALID_VALUE", 8: "ARCH_MISMATCH",
		11: "MAPPING_ERROR", 13: "EXECUTION_FAILED", 14: "INTERNAL_ERROR", 15: "NOT_SUPPORTED", 16: "LICENSE_ERROR"}
	solver := map[int32]string{1: "NOT_INITIALIZED", 2: "ALLOC_FAILED", 3: "INVALID_VALUE", 4: "ARCH_MISMATCH",
		5: "MAPPING_ERROR", 6: "EXECUTION_FAILED", 7: "INTERNAL_ERROR", 8: "MATRIX_TYPE_NOT_SUPPORTED", 9: "NOT_SUPPORTED"}
	m, prefix := blas, "CUBLAS_STATUS_"
	if lib == "cusolver" {
		m, prefix = solver, "CUSOLVER_STATUS_"
	}
	if n, ok := m[code]; ok {
		return prefix + n
	}
	return prefix + "UNKNOWN"
}

func libCheck(lib, call string, code int32) error {
	if code == 0 {
		return nil
	}
	return &LibraryStatus{Library: lib, Call: call, Code: code}
}

// Argument enums shared by cuBLAS and cuSOLVER.
const (
	opN        int32 = 0 // CUBLAS_OP_N
	opT        int32 = 1 // CUBLAS_OP_T
	fillLower  int32 = 0 // CUBLAS_FILL_MODE_LOWER
	fillUpper  int32 = 1 // CUBLAS_FILL_MODE_UPPER
	sideLeft   int32 = 0 // CUBLAS_SIDE_LEFT
	sideRight  int32 = 1 // CUBLAS_SIDE_RIGHT
	diagNonUni int32 = 0 // CUBLAS_DIAG_NON_UNIT
)

// openLib loads the first library of names (or name, when given) and
// binds syms.
func openLib(name string, defaults []string, syms []symbol) (string, error) {
	names := defaults
	if name != "" {
		names = []string{name}
	}
	var errs []error
	for _, n := range names {
		lib, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := bind(lib, n, syms); err != nil {
			return "", fmt.Errorf("%w: %w", ErrNoLibrary, err)
		}
		return n, nil
	}
	return "", fmt.Errorf("%w: %w", ErrNoLibrary, errors.Join(errs...))
}

// BLAS is the cuBLAS library.
type BLAS struct {
	path string
	// cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
	create func(h *uintptr) int32
	// cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
	destroy func(h uintptr) int32
	// cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId)
	setStream func(h, stream uintptr) int32
	// cublasStatus_t cublasDgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
	// cublasOperation_t transb, int m, int n, int k, const double *alpha,
	// const double *A, int lda, const double *B, int ldb, const double *beta,
	// double *C, int ldc); cublasSgemm_v2 the same with float.
	dgemm func(h uintptr, ta, tb, m, n, k int32, alpha *float64, a DevicePtr, lda int32, b DevicePtr, ldb int32, beta *float64, c DevicePtr, ldc int32) int32
	sgemm func(h uintptr, ta, tb, m, n, k int32, alpha *float32, a DevicePtr, lda int32, b DevicePtr, ldb int32, beta *float32, c DevicePtr, ldc int32) int32
	// cublasStatus_t cublasDsyrk_v2(cublasHandle_t handle, cublasFillMode_t uplo,
	// cublasOperation_t trans, int n, int k, const double *alpha,
	// const double *A, int lda, const double *beta, double *C, int ldc)
	dsyrk func(h uintptr, uplo, trans, n, k int32, alpha *float64, a DevicePtr, lda int32, beta *float64, c DevicePtr, ldc int32) int32
	ssyrk func(h uintptr, uplo, trans, n, k int32, alpha *float32, a DevicePtr, lda int32, beta *float32, c DevicePtr, ldc int32) int32
	// cublasStatus_t cublasDtrsm_v2(cublasHandle_t handle, cublasSideMode_t side,
	// cublasFillMode_t uplo, cublasOperation_t trans, cublasDiagType_t diag,
	// int m, int n, const double *alpha, const double *A, int lda,
	// double *B, int ldb)
	dtrsm func(h uintptr, side, uplo, trans, diag, m, n int32, alpha *float64, a DevicePtr, lda int32, b DevicePtr, ldb int32) int32
	strsm func(h uintptr, side, uplo, trans, diag, m, n int32, alpha *float32, a DevicePtr, lda int32, b DevicePtr, ldb int32) int32
}

// OpenBLAS loads cuBLAS from name, or from DefaultBLASLibraries when name
// is "".
func OpenBLAS(name string) (*BLAS, error) {
	b := &BLAS{}
	path, err := openLib(name, DefaultBLASLibraries, []symbol{
		{fptr: &b.create, names: []string{"cublasCreate_v2"}},
		{fptr: &b.destroy, names: []string{"cublasDestroy_v2"}},
		{fptr: &b.setStream, names: []string{"cublasSetStream_v2"}},
		{fptr: &b.dgemm, names: []string{"cublasDgemm_v2"}},
		{fptr: &b.sgemm, names: []string{"cublasSgemm_v2"}},
		{fptr: &b.dsyrk, names: []string{"cublasDsyrk_v2"}},
		{fptr: &b.ssyrk, names: []string{"cublasSsyrk_v2"}},
		{fptr: &b.dtrsm, names: []string{"cublasDtrsm_v2"}},
		{fptr: &b.strsm, names: []string{"cublasStrsm_v2"}},
	})
	if err != nil {
		return nil, err
	}
	b.path = path
	return b, nil
}

// Library returns the name cuBLAS was loaded from.
func (b *BLAS) Library() string { return b.path }

// A BLASHandle is a cuBLAS handle of one context, bound to one stream.
// Like cuBLAS's, it is not for concurrent use: give each worker its own.
type BLASHandle struct {
	b *BLAS
	c *Context
	h uintptr
}

// NewHandle creates a cuBLAS handle in c (cublasCreate_v2, on c's
// thread) bound to stream s (nil: the default stream).
func (b *BLAS) NewHandle(ctx context.Context, c *Context, s *Stream) (*BLASHandle, error) {
	h := &BLASHandle{b: b, c: c}
	err := c.Do(ctx, func() error {
		if err := libCheck("cublas", "cublasCreate_v2", b.create(&h.h)); err != nil {
			return err
		}
		if err := libCheck("cublas", "cublasSetStream_v2", b.setStream(h.h, s.h())); err != nil {
			_ = b.destroy(h.h)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// Destroy releases the handle (cublasDestroy_v2).
func (h *BLASHandle) Destroy(ctx context.Context) error {
	return h.c.Do(ctx, func() error { return libCheck("cublas", "cublasDestroy_v2", h.b.destroy(h.h)) })
}

func trans(t bool) int32 {
	if t {
		return opT
	}
	return opN
}

func fill(upper bool) int32 {
	if upper {
		return fillUpper
	}
	return fillLower
}

// Gemm queues C := alpha·op(A)·op(B) + beta·C on the handle's stream, in
// cuBLAS's column-major convention: op(A) is m×k, op(B) k×n, C m×n, with
// leading dimensions lda, ldb, ldc (cublasDgemm_v2 / cublasSgemm_v2).
func Gemm[T Float](h *BLASHandle, transA, transB bool, m, n, k int, alpha T, a DevicePtr, lda int, b DevicePtr, ldb int, beta T, c DevicePtr, ldc int) error {
	return h.c.Do(context.Background(), func() error {
		switch any(alpha).(type) {
		case float32:
			al, be := float32(alpha), float32(beta)
			return libCheck("cublas", "cublasSgemm_v2", h.b.sgemm(h.h, trans(transA), trans(transB), int32(m), int32(n), int32(k), &al, a, int32(lda), b, int32(ldb), &be, c, int32(ldc)))
		default:
			al, be := float64(alpha), float64(beta)
			return libCheck("cublas", "cublasDgemm_v2", h.b.dgemm(h.h, trans(transA), trans(transB), int32(m), int32(n), int32(k), &al, a, int32(lda), b, int32(ldb), &be, c, int32(ldc)))
		}
	})
}

// Syrk queues C := alpha·op(A)·op(A)ᵀ + beta·C on the upper or lower
// triangle of the n×n C, column-major; op(A) is n×k (transA: A is k×n)
// (cublasDsyrk_v2 / cublasSsyrk_v2).
func Syrk[T Float](h *BLASHandle, upper, transA bool, n, k int, alpha T, a DevicePtr, lda int, beta T, c DevicePtr, ldc int) error {
	return h.c.Do(context.Background(), func() error {
		switch any(alpha).(type) {
		case float32:
			al, be := float32(alpha), float32(beta)
			return libCheck("cublas", "cublasSsyrk_v2", h.b.ssyrk(h.h, fill(upper), trans(transA), int32(n), int32(k), &al, a, int32(lda), &be, c, int32(ldc)))
		default:
			al, be := float64(alpha), float64(beta)
			return libCheck("cublas", "cublasDsyrk_v2", h.b.dsyrk(h.h, fill(upper), trans(transA), int32(n), int32(k), &al, a, int32(lda), &be, c, int32(ldc)))
		}
	})
}

// Trsm queues the solve of op(A)·X = alpha·B (left) or X·op(A) = alpha·B
// (right) for X, overwriting the m×n B; A is triangular (upper or lower)
// with a non-unit diagonal, column-major (cublasDtrsm_v2 /
// cublasStrsm_v2).
func Trsm[T Float](h *BLASHandle, right, upper, transA bool, m, n int, alpha T, a DevicePtr, lda int, b DevicePtr, ldb int) error {
	side := sideLeft
	if right {
		side = sideRight
	}
	return h.c.Do(context.Background(), func() error {
		switch any(alpha).(type) {
		case float32:
			al := float32(alpha)
			return libCheck("cublas", "cublasStrsm_v2", h.b.strsm(h.h, side, fill(upper), trans(transA), diagNonUni, int32(m), int32(n), &al, a, int32(lda), b, int32(ldb)))
		default:
			al := float64(alpha)
			return libCheck("cublas", "cublasDtrsm_v2", h.b.dtrsm(h.h, side, fill(upper), trans(transA), diagNonUni, int32(m), int32(n), &al, a, int32(lda), b, int32(ldb)))
		}
	})
}

// Solver is the cuSOLVER dense library.
type Solver struct {
	path string
	// cusolverStatus_t cusolverDnCreate(cusolverDnHandle_t *handle)
	create func(h *uintptr) int32
	// cusolverStatus_t cusolverDnDestroy(cusolverDnHandle_t handle)
	destroy func(h uintptr) int32
	// cusolverStatus_t cusolverDnSetStream(cusolverDnHandle_t handle, cudaStream_t streamId)
	setStream func(h, stream uintptr) int32
	// cusolverStatus_t cusolverDnDpotrf_bufferSize(cusolverDnHandle_t handle,
	// cublasFillMode_t uplo, int n, double *A, int lda, int *Lwork)
	dpotrfSize func(h uintptr, uplo, n int32, a DevicePtr, lda int32, lwork *int32) int32
	spotrfSize func(h uintptr, uplo, n int32, a DevicePtr, lda int32, lwork *int32) int32
	// cusolverStatus_t cusolverDnDpotrf(cusolverDnHandle_t handle,
	// cublasFillMode_t uplo, int n, double *A, int lda, double *Workspace,
	// int Lwork, int *devInfo)
	dpotrf func(h uintptr, uplo, n int32, a DevicePtr, lda int32, work DevicePtr, lwork int32, info DevicePtr) int32
	spotrf func(h uintptr, uplo, n int32, a DevicePtr, lda int32, work DevicePtr, lwork int32, info DevicePtr) int32
}

// OpenSolver loads cuSOLVER from name, or from DefaultSolverLibraries
// when name is "".
func OpenSolver(name string) (*Solver, error) {
	sv := &Solver{}
	path, err := openLib(name, DefaultSolverLibraries, []symbol{
		{fptr: &sv.create, names: []string{"cusolverDnCreate"}},
		{fptr: &sv.destroy, names: []string{"cusolverDnDestroy"}},
		{fptr: &sv.setStream, names: []string{"cusolverDnSetStream"}},
		{fptr: &sv.dpotrfSize, names: []string{"cusolverDnDpotrf_bufferSize"}},
		{fptr: &sv.spotrfSize, names: []string{"cusolverDnSpotrf_bufferSize"}},
		{fptr: &sv.dpotrf, names: []string{"cusolverDnDpotrf"}},
		{fptr: &sv.spotrf, names: []string{"cusolverDnSpotrf"}},
	})
	if err != nil {
		return nil, err
	}
	sv.path = path
	return sv, nil
}

// Library returns the name cuSOLVER was loaded from.
func (sv *Solver) Library() string { return sv.path }

// A SolverHandle is a cuSOLVER dense handle of one context, bound to one
// stream; not for concurrent use.
type SolverHandle struct {
	sv *Solver
	c  *Context
	h  uintptr
}

// NewHandle creates a cuSOLVER handle in c bound to stream s.
func (sv *Solver) NewHandle(ctx context.Context, c *Context, s *Stream) (*SolverHandle, error) {
	h := &SolverHandle{sv: sv, c: c}
	err := c.Do(ctx, func() error {
		if err := libCheck("cusolver", "cusolverDnCreate", sv.create(&h.h)); err != nil {
			return err
		}
		if err := libCheck("cusolver", "cusolverDnSetStream", sv.setStream(h.h, s.h())); err != nil {
			_ = sv.destroy(h.h)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// Destroy releases the handle (cusolverDnDestroy).
func (h *SolverHandle) Destroy(ctx context.Context) error {
	return h.c.Do(ctx, func() error { return libCheck("cusolver", "cusolverDnDestroy", h.sv.destroy(h.h)) })
}

// PotrfWorkspace returns the workspace, in elements of T, that Potrf of an
// n×n matrix with leading dimension lda needs.
func PotrfWorkspace[T Float](h *SolverHandle, upper bool, n int, a DevicePtr, lda int) (int, error) {
	var lw int32
	err := h.c.Do(context.Background(), func() error {
		var z T
		if _, ok := any(z).(float32); ok {
			return libCheck("cusolver", "cusolverDnSpotrf_bufferSize", h.sv.spotrfSize(h.h, fill(upper), int32(n), a, int32(lda), &lw))
		}
		return libCheck("cusolver", "cusolverDnDpotrf_bufferSize", h.sv.dpotrfSize(h.h, fill(upper), int32(n), a, int32(lda), &lw))
	})
	return int(lw), err
}

// Potrf queues the Cholesky factorization of the n×n column-major A in
// place (upper: A = UᵀU, lower: A = LLᵀ), with a workspace of lwork
// elements of T and an int on the device, info, that it sets to 0, or to
// i when the leading minor of order i is not positive definite
// (cusolverDnDpotrf / cusolverDnSpotrf).
func Potrf[T Float](h *SolverHandle, upper bool, n int, a DevicePtr, lda int, work DevicePtr, lwork int, info DevicePtr) error {
	return h.c.Do(context.Background(), func() error {
		var z T
		if _, ok := any(z).(float32); ok {
			return libCheck("cusolver", "cusolverDnSpotrf", h.sv.spotrf(h.h, fill(upper), int32(n), a, int32(lda), work, int32(lwork), info))
		}
		return libCheck("cusolver", "cusolverDnDpotrf", h.sv.dpotrf(h.h, fill(upper), int32(n), a, int32(lda), work, int32(lwork), info))
	})
}
