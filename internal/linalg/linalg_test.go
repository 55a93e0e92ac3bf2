package linalg

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The references below are the textbook triple loops, accumulated in
// float64 whatever the tile type, so they are independent of every kernel
// under test.

func refPotrf[T Float](n int, a []T, lda int) []float64 {
	l := make([]float64, n*n)
	for i := range n {
		for j := 0; j <= i; j++ {
			l[i*n+j] = float64(a[i*lda+j])
		}
	}
	for j := range n {
		s := l[j*n+j]
		for k := range j {
			s -= l[j*n+k] * l[j*n+k]
		}
		l[j*n+j] = math.Sqrt(s)
		for i := j + 1; i < n; i++ {
			s := l[i*n+j]
			for k := range j {
				s -= l[i*n+k] * l[j*n+k]
			}
			l[i*n+j] = s / l[j*n+j]
		}
	}
	return l
}

// refGemm returns C − A·Bᵀ (m×n, dense, leading dimension n).
func refGemm[T Float](m, n, k int, a []T, lda int, b []T, ldb int, c []T, ldc int) []float64 {
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			s := float64(c[i*ldc+j])
			for p := range k {
				s -= float64(a[i*lda+p]) * float64(b[j*ldb+p])
			}
			out[i*n+j] = s
		}
	}
	return out
}

// refTrsm returns X with X·Lᵀ = A by forward substitution over columns.
func refTrsm[T Float](m, n int, l []T, ldl int, a []T, lda int) []float64 {
	x := make([]float64, m*n)
	for i := range m {
		for j := range n {
			s := float64(a[i*lda+j])
			for p := range j {
				s -= x[i*n+p] * float64(l[j*ldl+p])
			}
			x[i*n+j] = s / float64(l[j*ldl+j])
		}
	}
	return x
}

// randMat returns an r×c matrix with leading dimension ld whose padding
// holds a sentinel, entries uniform in [-1, 1).
func randMat[T Float](rng *rand.Rand, r, c, ld int) []T {
	a := make([]T, (r-1)*ld+c)
	for i := range a {
		a[i] = sentinel
	}
	for i := range r {
		for j := range c {
			a[i*ld+j] = T(2*rng.Float64() - 1)
		}
	}
	return a
}

// sentinel marks elements a kernel must not write.
const sentinel = 12345

// randSPD returns a well-conditioned SPD n×n matrix: B·Bᵀ/n + I for a
// random B, with leading dimension ld.
func randSPD[T Float](rng *rand.Rand, n, ld int) []T {
	b := randMat[float64](rng, n, n, n)
	a := make([]T, (n-1)*ld+n)
	for i := range a {
		a[i] = sentinel
	}
	for i := range n {
		for j := range n {
			s := 0.0
			for p := range n {
				s += b[i*n+p] * b[j*n+p]
			}
			s /= float64(n)
			if i == j {
				s++
			}
			a[i*ld+j] = T(s)
		}
	}
	return a
}

// tol is the relative tolerance for kernels whose inputs are O(1) and
// whose inner dimension is at most a few hundred.
func tol[T Float]() float64 {
	var z T
	if _, ok := any(z).(float32); ok {
		return 2e-4
	}
	return 1e-11
}

// closeTo checks got (r×c, leading dimension ld) against want (dense)
// with the relative tolerance scaled by want's largest entry.
func closeTo[T Float](t *testing.T, name string, r, c int, got []T, ld int, want []float64) {
	t.Helper()
	scale := 1.0
	for _, v := range want {
		scale = max(scale, math.Abs(v))
	}
	bad := 0
	for i := range r {
		for j := range c {
			if d := math.Abs(float64(got[i*ld+j]) - want[i*c+j]); !(d <= tol[T]()*scale) {
				if bad < 5 {
					t.Errorf("%s[%d,%d] = %v, want %v (diff %.3g, tol %.3g)", name, i, j, got[i*ld+j], want[i*c+j], d, tol[T]()*scale)
				}
				bad++
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d entries off", name, bad, r*c)
	}
}

// shapes covers the empty case, tiny tiles, sizes around gonum's 64-wide
// blocking and the potrf panel, and padded leading dimensions.
var shapes = []struct{ m, n, k, pad int }{
	{1, 1, 1, 0}, {3, 5, 2, 1}, {17, 33, 9, 3}, {64, 64, 64, 0}, {65, 130, 70, 7}, {200, 129, 192, 0}, {256, 256, 256, 5},
}

func testKernels[T Float](t *testing.T) {
	for ci, s := range shapes {
		t.Run(fmt.Sprintf("m=%d,n=%d,k=%d,pad=%d", s.m, s.n, s.k, s.pad), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(ci)))
			t.Run("Gemm", func(t *testing.T) {
				a := randMat[T](rng, s.m, s.k, s.k+s.pad)
				b := randMat[T](rng, s.n, s.k, s.k+2*s.pad)
				c := randMat[T](rng, s.m, s.n, s.n+s.pad)
				want := refGemm(s.m, s.n, s.k, a, s.k+s.pad, b, s.k+2*s.pad, c, s.n+s.pad)
				Gemm(s.m, s.n, s.k, a, s.k+s.pad, b, s.k+2*s.pad, c, s.n+s.pad)
				closeTo(t, "C", s.m, s.n, c, s.n+s.pad, want)
				checkPadding(t, s.m, s.n, c, s.n+s.pad)
			})
			t.Run("Syrk", func(t *testing.T) {
				n, k, ld := s.n, s.k, s.n+s.pad
				a := randMat[T](rng, n, k, k+s.pad)
				c := randMat[T](rng, n, n, ld)
				upper := append([]T(nil), c...)
				full := refGemm(n, n, k, a, k+s.pad, a, k+s.pad, c, ld)
				Syrk(n, k, a, k+s.pad, c, ld)
				for i := range n {
					for j := range n {
						if j > i {
							assert.Equal(t, upper[i*ld+j], c[i*ld+j], "upper [%d,%d] written", i, j)
							c[i*ld+j] = T(full[i*n+j]) // so closeTo compares only the lower triangle
						}
					}
				}
				closeTo(t, "C", n, n, c, ld, full)
				checkPadding(t, n, n, c, ld)
			})
			t.Run("Trsm", func(t *testing.T) {
				m, n := s.m, s.n
				// L from the Cholesky of an SPD matrix is well conditioned.
				spd := randSPD[float64](rng, n, n)
				lf := refPotrf(n, spd, n)
				l := make([]T, (n-1)*(n+s.pad)+n)
				for i := range n {
					for j := range n {
						l[i*(n+s.pad)+j] = T(lf[i*n+j])
						if j > i {
							l[i*(n+s.pad)+j] = sentinel // must not be read
						}
					}
				}
				a := randMat[T](rng, m, n, n+s.pad)
				want := refTrsm(m, n, l, n+s.pad, a, n+s.pad)
				Trsm(m, n, l, n+s.pad, a, n+s.pad)
				closeTo(t, "X", m, n, a, n+s.pad, want)
				checkPadding(t, m, n, a, n+s.pad)
			})
			t.Run("Potrf", func(t *testing.T) {
				n, ld := s.n, s.n+s.pad
				a := randSPD[T](rng, n, ld)
				orig := append([]T(nil), a...)
				want := refPotrf(n, a, ld)
				require.NoError(t, Potrf(n, a, ld))
				got := append([]T(nil), a...)
				for i := range n {
					for j := i + 1; j < n; j++ {
						assert.Equal(t, orig[i*ld+j], got[i*ld+j], "upper [%d,%d] written", i, j)
						got[i*ld+j] = 0
					}
				}
				closeTo(t, "L", n, n, got, ld, want)
				checkPadding(t, n, n, a, ld)
			})
		})
	}
}

// checkPadding fails when a kernel wrote between rows (ld > columns).
func checkPadding[T Float](t *testing.T, r, c int, a []T, ld int) {
	t.Helper()
	for i := range r - 1 {
		for j := c; j < ld; j++ {
			if a[i*ld+j] != sentinel {
				t.Fatalf("padding [%d,%d] overwritten: %v", i, j, a[i*ld+j])
			}
		}
	}
}

func TestKernels(t *testing.T) {
	t.Logf("backend %s", Backend)
	t.Run("float32", testKernels[float32])
	t.Run("float64", testKernels[float64])
}

// A zero on L's diagonal: the columns of X before it are solved as with a
// regular L, the column at it is not finite (a division by zero), as
// forward substitution gives; no kernel panics. The zero sits past the
// first 32 columns, in a block the OpenBLAS kernel inverts on its own.
func testTrsmSingular[T Float](t *testing.T) {
	const m, n, zero = 40, 70, 45
	rng := rand.New(rand.NewPCG(3, n))
	lf := refPotrf(n, randSPD[float64](rng, n, n), n)
	l := make([]T, n*n)
	for i := range n {
		for j := 0; j <= i; j++ {
			l[i*n+j] = T(lf[i*n+j])
		}
	}
	l[zero*n+zero] = 0
	a := randMat[T](rng, m, n, n)
	want := refTrsm(m, n, l, n, a, n)
	Trsm(m, n, l, n, a, n)
	gotHead, wantHead := make([]T, m*zero), make([]float64, m*zero)
	for i := range m {
		for j := range zero {
			gotHead[i*zero+j], wantHead[i*zero+j] = a[i*n+j], want[i*n+j]
		}
		if v := float64(a[i*n+zero]); !math.IsInf(v, 0) && !math.IsNaN(v) {
			t.Errorf("X[%d,%d] = %v, want a non-finite value (L[%d,%d] is 0)", i, zero, v, zero, zero)
		}
	}
	closeTo(t, "X before the zero pivot", m, zero, gotHead, zero, wantHead)
}

func TestTrsmSingular(t *testing.T) {
	t.Run("float32", testTrsmSingular[float32])
	t.Run("float64", testTrsmSingular[float64])
}

func testNotSPD[T Float](t *testing.T) {
	for _, n := range []int{1, 5, 100, 200} {
		rng := rand.New(rand.NewPCG(2, uint64(n)))
		a := randSPD[T](rng, n, n)
		// A negative pivot in the last row makes the last leading minor
		// negative while all the earlier ones stay positive.
		a[(n-1)*n+n-1] = -float64Of[T](1e3)
		err := Potrf(n, a, n)
		require.Error(t, err, "n=%d", n)
		assert.ErrorIs(t, err, ErrNotPositiveDefinite, "n=%d", n)
	}
}

func float64Of[T Float](v float64) T { return T(v) }

func TestPotrfNotPositiveDefinite(t *testing.T) {
	t.Run("float32", testNotSPD[float32])
	t.Run("float64", testNotSPD[float64])
}

func TestPotrfEmpty(t *testing.T) {
	require.NoError(t, Potrf[float64](0, nil, 1))
}

func TestBadDimensionsPanic(t *testing.T) {
	a := make([]float64, 16)
	cases := []struct {
		name string
		f    func()
	}{
		{"short a", func() { Gemm(4, 4, 5, a, 5, a, 5, a, 4) }},
		{"small ld", func() { Syrk(4, 4, a, 3, a, 4) }},
		{"negative", func() { Trsm(-1, 4, a, 4, a, 4) }},
		{"potrf ld", func() { _ = Potrf(4, a, 2) }},
	}
	for _, c := range cases {
		assert.Panics(t, c.f, c.name)
	}
}

func TestFlops(t *testing.T) {
	// Counting the multiply-adds of the reference loops gives the same
	// leading terms: GEMM m·n·k of each, TRSM m·n(n+1)/2 ≈ m·n²/2 of each.
	assert.Equal(t, 2.0*3*4*5, GemmFlops(3, 4, 5))
	assert.Equal(t, 3.0*4*4, TrsmFlops(3, 4))
	assert.Equal(t, 4.0*5*6, SyrkFlops(4, 6))
	assert.InDelta(t, 1.0, PotrfFlops(1), 1e-12) // one square root
	assert.InDelta(t, 1e9/3, CholeskyFlops(1000), 1e-3)
	// The tile counts of a 4×4-tile Cholesky sum to the full potrf count.
	n, b := 4, 64
	sum := 0.0
	for k := range n {
		sum += PotrfFlops(b)
		for i := k + 1; i < n; i++ {
			sum += TrsmFlops(b, b) + SyrkFlops(b, b)
			for j := k + 1; j < i; j++ {
				sum += GemmFlops(b, b, b)
			}
		}
	}
	assert.InEpsilon(t, PotrfFlops(n*b), sum, 0.02)
}

var errSink error

func benchKernels[T Float](b *testing.B) {
	for _, n := range []int{64, 128, 256, 512} {
		rng := rand.New(rand.NewPCG(3, uint64(n)))
		x := randMat[T](rng, n, n, n)
		y := randMat[T](rng, n, n, n)
		c := randMat[T](rng, n, n, n)
		spd := randSPD[T](rng, n, n)
		lo := append([]T(nil), spd...)
		require.NoError(b, Potrf(n, lo, n))
		run := func(name string, flops float64, f func()) {
			b.Run(fmt.Sprintf("%s/n=%d", name, n), func(b *testing.B) {
				for b.Loop() {
					f()
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
		run("Gemm", GemmFlops(n, n, n), func() { Gemm(n, n, n, x, n, y, n, c, n) })
		run("Syrk", SyrkFlops(n, n), func() { Syrk(n, n, x, n, c, n) })
		// Trsm and Potrf overwrite their input: each iteration starts from
		// a fresh copy (n² moves against n³ flops), so repeated solves
		// cannot drift into denormals.
		a := make([]T, len(spd))
		run("Trsm", TrsmFlops(n, n), func() { copy(a, c); Trsm(n, n, lo, n, a, n) })
		run("Potrf", PotrfFlops(n), func() { copy(a, spd); errSink = Potrf(n, a, n) })
	}
}

func BenchmarkKernels(b *testing.B) {
	b.Run("float32", benchKernels[float32])
	b.Run("float64", benchKernels[float64])
}
