//go:build !cblas

package linalg

import (
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	lapack "gonum.org/v1/gonum/lapack/gonum"
)

// Backend names the kernel implementation compiled in: "gonum" (pure Go,
// the default) or "openblas" (build tag cblas).
const Backend = "gonum"

// gemmRows and gemmCols bound the pieces handed to gonum's [SD]gemm:
// gonum splits a product into 64×64 blocks and fans them out over
// GOMAXPROCS goroutines once there are 4 or more (blas/gonum/gonum.go
// minParBlock). A tile kernel must run on the one worker that executes its
// task, so every call stays at 1×3 blocks.
const (
	gemmRows = 64
	gemmCols = 3 * 64
)

func gemm32(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	var impl gonum.Implementation
	for i := 0; i < m; i += gemmRows {
		mi := min(gemmRows, m-i)
		for j := 0; j < n; j += gemmCols {
			nj := min(gemmCols, n-j)
			impl.Sgemm(blas.NoTrans, blas.Trans, mi, nj, k, -1, a[i*lda:], lda, b[j*ldb:], ldb, 1, c[i*ldc+j:], ldc)
		}
	}
}

func gemm64(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
	var impl gonum.Implementation
	for i := 0; i < m; i += gemmRows {
		mi := min(gemmRows, m-i)
		for j := 0; j < n; j += gemmCols {
			nj := min(gemmCols, n-j)
			impl.Dgemm(blas.NoTrans, blas.Trans, mi, nj, k, -1, a[i*lda:], lda, b[j*ldb:], ldb, 1, c[i*ldc+j:], ldc)
		}
	}
}

func syrk32(n, k int, a []float32, lda int, c []float32, ldc int) {
	gonum.Implementation{}.Ssyrk(blas.Lower, blas.NoTrans, n, k, -1, a, lda, 1, c, ldc)
}

func syrk64(n, k int, a []float64, lda int, c []float64, ldc int) {
	gonum.Implementation{}.Dsyrk(blas.Lower, blas.NoTrans, n, k, -1, a, lda, 1, c, ldc)
}

func trsm32(m, n int, l []float32, ldl int, a []float32, lda int) {
	gonum.Implementation{}.Strsm(blas.Right, blas.Lower, blas.Trans, blas.NonUnit, m, n, 1, l, ldl, a, lda)
}

func trsm64(m, n int, l []float64, ldl int, a []float64, lda int) {
	gonum.Implementation{}.Dtrsm(blas.Right, blas.Lower, blas.Trans, blas.NonUnit, m, n, 1, l, ldl, a, lda)
}

func potrf64(n int, a []float64, lda int) bool {
	// gonum's Dpotrf is blocked with 64-column panels; its Dgemm calls stay
	// serial for tiles up to 256 (see gemmRows).
	return lapack.Implementation{}.Dpotrf(blas.Lower, n, a, lda)
}

// potrfBlock is the panel width of the blocked single-precision Cholesky,
// the block size gonum's Ilaenv gives DPOTRF.
const potrfBlock = 64

// potrf32 is the blocked right-looking lower Cholesky of LAPACK's xPOTRF
// (the lower branch of gonum's Dpotrf, which gonum has only in double
// precision): per panel of potrfBlock columns, a SYRK update of the
// diagonal block, an unblocked factorization of it, a GEMM update of the
// panel below and a TRSM with the new diagonal block.
func potrf32(n int, a []float32, lda int) bool {
	if n <= potrfBlock {
		return potf2(n, a, lda)
	}
	var impl gonum.Implementation
	for j := 0; j < n; j += potrfBlock {
		jb := min(potrfBlock, n-j)
		impl.Ssyrk(blas.Lower, blas.NoTrans, jb, j, -1, a[j*lda:], lda, 1, a[j*lda+j:], lda)
		if !potf2(jb, a[j*lda+j:], lda) {
			return false
		}
		if j+jb < n {
			gemm32(n-j-jb, jb, j, a[(j+jb)*lda:], lda, a[j*lda:], lda, a[(j+jb)*lda+j:], lda)
			trsm32(n-j-jb, jb, a[j*lda+j:], lda, a[(j+jb)*lda+j:], lda)
		}
	}
	return true
}

// potf2 is the unblocked lower Cholesky (LAPACK xPOTF2) of a row-major
// tile: with rows contiguous, each entry is one dot product of two row
// prefixes.
func potf2[T Float](n int, a []T, lda int) bool {
	for j := 0; j < n; j++ {
		rj := a[j*lda : j*lda+j]
		d := a[j*lda+j] - dot(rj, rj)
		if !(d > 0) { // also catches NaN
			return false
		}
		d = T(math.Sqrt(float64(d)))
		a[j*lda+j] = d
		for i := j + 1; i < n; i++ {
			a[i*lda+j] = (a[i*lda+j] - dot(a[i*lda:i*lda+j], rj)) / d
		}
	}
	return true
}

func dot[T Float](x, y []T) T {
	switch x := any(x).(type) {
	case []float32:
		return T(gonum.Implementation{}.Sdot(len(x), x, 1, any(y).([]float32), 1))
	case []float64:
		return T(gonum.Implementation{}.Ddot(len(x), x, 1, any(y).([]float64), 1))
	}
	panic("unreachable")
}
