// Package linalg holds the dense tile kernels of pz's tiled linear-algebra
// apps and benchmarks: the four kernels of a right-looking tiled Cholesky
// factorization, in single and double precision, on row-major tiles with a
// leading dimension.
//
// # Kernels
//
//   - Potrf: A = L·Lᵀ, lower Cholesky factor of a diagonal tile.
//   - Trsm: A := A·L⁻ᵀ, the solve of a tile below the diagonal.
//   - Syrk: C := C − A·Aᵀ (lower triangle), the update of a diagonal tile.
//   - Gemm: C := C − A·Bᵀ, the update of an off-diagonal tile.
//
// Each has a flop count (PotrfFlops, TrsmFlops, SyrkFlops, GemmFlops) for
// GFLOP/s figures, and CholeskyFlops gives the conventional n³/3 of a whole
// factorization. Kernels are generic over Float (float32 or float64); they
// panic on dimensions that do not fit their slices, like gonum's BLAS.
//
// # Backends
//
// The default build is pure Go: gonum's BLAS (blas/gonum) and gonum's
// LAPACK Dpotrf, plus a blocked single-precision Cholesky written here
// after LAPACK's xPOTRF, since gonum's LAPACK is double precision only.
// Every kernel runs on the calling goroutine: gonum fans a large GEMM out
// over GOMAXPROCS goroutines, so Gemm hands it pieces too small to split.
//
// With the build tag cblas the same API calls OpenBLAS through a thin cgo
// binding (cblas.h and LAPACK's xPOTRF exported by libopenblas; Debian
// package libopenblas-dev):
//
//	go test -tags cblas ./internal/linalg/
//
// OpenBLAS is switched to one thread when the program loads, because a
// tile kernel runs on one scheduler worker. To use Debian's serial build of
// OpenBLAS, as StarPU's peer measurements do, run the binary with
// LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-serial. Backend names
// the implementation compiled in.
//
// # Layout
//
// A tile of r rows and c columns with leading dimension ld ≥ c occupies
// a[i*ld+j] for i < r, j < c; elements between rows are never written.
// A row-major lower factor is the column-major upper factor of the same
// memory, which is how the OpenBLAS backend calls LAPACK.
package linalg
