package linalg

import (
	"errors"
	"fmt"
)

// Float is the element type of a tile: single or double precision.
type Float interface {
	float32 | float64
}

// ErrNotPositiveDefinite is returned (wrapped, with the failing tile
// column) by Potrf when the tile is not symmetric positive definite.
var ErrNotPositiveDefinite = errors.New("linalg: matrix is not positive definite")

// Potrf computes the lower Cholesky factor L of the symmetric positive
// definite n×n row-major tile a (leading dimension lda ≥ n), so that
// A = L·Lᵀ. Only the lower triangle of a is read; it is overwritten by L.
// The strict upper triangle is left untouched. It returns an error wrapping
// ErrNotPositiveDefinite when a leading minor is not positive; a is then
// partially overwritten. It panics on invalid dimensions.
func Potrf[T Float](n int, a []T, lda int) error {
	checkMat("a", n, n, len(a), lda)
	if n == 0 {
		return nil
	}
	var ok bool
	switch a := any(a).(type) {
	case []float32:
		ok = potrf32(n, a, lda)
	case []float64:
		ok = potrf64(n, a, lda)
	}
	if !ok {
		return fmt.Errorf("%w: %d×%d tile (%s)", ErrNotPositiveDefinite, n, n, Backend)
	}
	return nil
}

// Trsm solves X·Lᵀ = A for X and stores X in a: A := A·L⁻ᵀ, where a is
// m×n (leading dimension lda) and l is an n×n lower triangular tile with a
// non-unit diagonal (leading dimension ldl; its strict upper triangle is not
// read). It is the panel update of a right-looking Cholesky. It panics on
// invalid dimensions.
func Trsm[T Float](m, n int, l []T, ldl int, a []T, lda int) {
	checkMat("l", n, n, len(l), ldl)
	checkMat("a", m, n, len(a), lda)
	if m == 0 || n == 0 {
		return
	}
	switch l := any(l).(type) {
	case []float32:
		trsm32(m, n, l, ldl, any(a).([]float32), lda)
	case []float64:
		trsm64(m, n, l, ldl, any(a).([]float64), lda)
	}
}

// Syrk updates the lower triangle of the n×n tile c with C := C − A·Aᵀ,
// where a is n×k. The strict upper triangle of c is not referenced. It
// panics on invalid dimensions.
func Syrk[T Float](n, k int, a []T, lda int, c []T, ldc int) {
	checkMat("a", n, k, len(a), lda)
	checkMat("c", n, n, len(c), ldc)
	if n == 0 || k == 0 {
		return
	}
	switch a := any(a).(type) {
	case []float32:
		syrk32(n, k, a, lda, any(c).([]float32), ldc)
	case []float64:
		syrk64(n, k, a, lda, any(c).([]float64), ldc)
	}
}

// Gemm updates the m×n tile c with C := C − A·Bᵀ, where a is m×k and b is
// n×k. It panics on invalid dimensions.
func Gemm[T Float](m, n, k int, a []T, lda int, b []T, ldb int, c []T, ldc int) {
	checkMat("a", m, k, len(a), lda)
	checkMat("b", n, k, len(b), ldb)
	checkMat("c", m, n, len(c), ldc)
	if m == 0 || n == 0 || k == 0 {
		return
	}
	switch a := any(a).(type) {
	case []float32:
		gemm32(m, n, k, a, lda, any(b).([]float32), ldb, any(c).([]float32), ldc)
	case []float64:
		gemm64(m, n, k, a, lda, any(b).([]float64), ldb, any(c).([]float64), ldc)
	}
}

// checkMat panics when an r×c row-major matrix with leading dimension ld
// does not fit in a slice of length n: a documented misuse, as in gonum's
// BLAS.
func checkMat(name string, r, c, n, ld int) {
	if r < 0 || c < 0 {
		panic(fmt.Sprintf("linalg: %s has negative dimension %d×%d", name, r, c))
	}
	if ld < max(1, c) {
		panic(fmt.Sprintf("linalg: %s leading dimension %d < %d columns", name, ld, c))
	}
	if r > 0 && c > 0 && n < (r-1)*ld+c {
		panic(fmt.Sprintf("linalg: %s too short: %d elements for %d×%d with ld %d", name, n, r, c, ld))
	}
}
