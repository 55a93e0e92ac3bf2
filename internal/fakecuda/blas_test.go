package fakecuda_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
)

// cuBLAS and cuSOLVER statuses and enums (cublas_api.h, cusolverDn.h).
const (
	blasNotInitialized   = 1
	blasInvalidValue     = 7
	blasExecutionFailed  = 13
	solverNotInitialized = 1
	solverInvalidValue   = 3

	opN, opT, opC    = 0, 1, 2
	lower, upper     = 0, 1
	left, right      = 0, 1
	nonUnit, unitDia = 0, 1
)

type float interface{ float32 | float64 }

// blasOps are the typed entry points of one precision.
type blasOps[T float] struct {
	gemm      func(h uintptr, ta, tb, m, n, k int32, alpha *T, a cuda.DevicePtr, lda int32, b cuda.DevicePtr, ldb int32, beta *T, c cuda.DevicePtr, ldc int32) int32
	syrk      func(h uintptr, uplo, trans, n, k int32, alpha *T, a cuda.DevicePtr, lda int32, beta *T, c cuda.DevicePtr, ldc int32) int32
	trsm      func(h uintptr, side, uplo, trans, diag, m, n int32, alpha *T, a cuda.DevicePtr, lda int32, b cuda.DevicePtr, ldb int32) int32
	potrfSize func(h uintptr, uplo, n int32, a cuda.DevicePtr, lda int32, lwork *int32) int32
	potrf     func(h uintptr, uplo, n int32, a cuda.DevicePtr, lda int32, work cuda.DevicePtr, lwork int32, info cuda.DevicePtr) int32
	prefix    string  // "D" or "S"
	tol       float64 // relative tolerance of the results
}

// blasLib binds the stand-in cuBLAS and cuSOLVER of an instance.
type blasLib struct {
	create, solverCreate       func(h *uintptr) int32
	destroy, solverDestroy     func(h uintptr) int32
	setStream, solverSetStream func(h, s uintptr) int32
	getStream, solverGetStream func(h uintptr, s *uintptr) int32
	d                          blasOps[float64]
	s                          blasOps[float32]
}

func bindBLAS(t *testing.T, lib string) *blasLib {
	t.Helper()
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = purego.Dlclose(h) })
	b := &blasLib{}
	b.d.prefix, b.d.tol = "D", 1e-11
	b.s.prefix, b.s.tol = "S", 2e-4
	for name, fptr := range map[string]any{
		"cublasCreate_v2":             &b.create,
		"cublasDestroy_v2":            &b.destroy,
		"cublasSetStream_v2":          &b.setStream,
		"cublasGetStream_v2":          &b.getStream,
		"cusolverDnCreate":            &b.solverCreate,
		"cusolverDnDestroy":           &b.solverDestroy,
		"cusolverDnSetStream":         &b.solverSetStream,
		"cusolverDnGetStream":         &b.solverGetStream,
		"cublasDgemm_v2":              &b.d.gemm,
		"cublasSgemm_v2":              &b.s.gemm,
		"cublasDsyrk_v2":              &b.d.syrk,
		"cublasSsyrk_v2":              &b.s.syrk,
		"cublasDtrsm_v2":              &b.d.trsm,
		"cublasStrsm_v2":              &b.s.trsm,
		"cusolverDnDpotrf_bufferSize": &b.d.potrfSize,
		"cusolverDnSpotrf_bufferSize": &b.s.potrfSize,
		"cusolverDnDpotrf":            &b.d.potrf,
		"cusolverDnSpotrf":            &b.s.potrf,
	} {
		sym, err := purego.Dlsym(h, name)
		require.NoError(t, err, name)
		purego.RegisterFunc(fptr, sym)
	}
	return b
}

// blasEnv is an instance with a context, a non-blocking stream and a
// cuBLAS and a cuSOLVER handle bound to it.
type blasEnv struct {
	t      *testing.T
	ctx    context.Context
	c      *cuda.Context
	lib    string
	r      *raw
	b      *blasLib
	s      uintptr // the stream
	h, sh  uintptr // cuBLAS and cuSOLVER handles
	stream func(uintptr) error
}

func newBLASEnv(t *testing.T) *blasEnv {
	t.Helper()
	d, lib := open(t, 1, 16<<20)
	ctx, c := newContext(t, d, 0)
	e := &blasEnv{t: t, ctx: ctx, c: c, lib: lib, r: bindRaw(t, lib), b: bindBLAS(t, lib)}
	e.do(func() error {
		return errors.Join(
			expect("stream", e.r.streamCreate(&e.s, 1), cuda.Success),
			status("cublasCreate", e.b.create(&e.h), 0),
			status("cusolverDnCreate", e.b.solverCreate(&e.sh), 0),
			status("cublasSetStream", e.b.setStream(e.h, e.s), 0),
			status("cusolverDnSetStream", e.b.solverSetStream(e.sh, e.s), 0),
		)
	})
	t.Cleanup(func() {
		_ = c.Do(ctx, func() error {
			_ = e.b.destroy(e.h)
			_ = e.b.solverDestroy(e.sh)
			return nil
		})
	})
	return e
}

// do runs fn on the context's thread and fails the test on its error.
func (e *blasEnv) do(fn func() error) {
	e.t.Helper()
	require.NoError(e.t, e.c.Do(e.ctx, fn))
}

// run calls an operation, wants status 0, and waits for the stream.
func (e *blasEnv) run(what string, call func() int32) {
	e.t.Helper()
	e.do(func() error {
		if err := status(what, call(), 0); err != nil {
			return err
		}
		return expect(what+": stream", e.r.streamSynchronize(e.s), cuda.Success)
	})
}

func status(what string, got, want int32) error {
	if got != want {
		return fmt.Errorf("%s: status %d, want %d", what, got, want)
	}
	return nil
}

func upload[T cuda.Number](e *blasEnv, x []T) cuda.DevicePtr {
	e.t.Helper()
	p, err := e.c.Alloc(e.ctx, len(x)*int(unsafe.Sizeof(x[0])))
	require.NoError(e.t, err)
	require.NoError(e.t, e.c.CopyHtoD(e.ctx, p, cuda.Bytes(x)))
	e.t.Cleanup(func() { _ = e.c.Free(e.ctx, p) })
	return p
}

func download[T cuda.Number](e *blasEnv, p cuda.DevicePtr, n int) []T {
	e.t.Helper()
	x := make([]T, n)
	require.NoError(e.t, e.c.CopyDtoH(e.ctx, cuda.Bytes(x), p))
	return x
}

// randMat returns an ld x cols column-major buffer of values in [-1, 1).
func randMat[T float](rng *rand.Rand, ld, cols int) []T {
	x := make([]T, ld*cols)
	for i := range x {
		x[i] = T(2*rng.Float64() - 1)
	}
	return x
}

// at reads element (i, j) of op(x), x column-major with leading dimension ld.
func at[T float](x []T, ld int, trans bool, i, j int) float64 {
	if trans {
		i, j = j, i
	}
	return float64(x[i+j*ld])
}

func same[T float](a, b T) bool {
	return math.Float64bits(float64(a)) == math.Float64bits(float64(b)) || (math.IsNaN(float64(a)) && math.IsNaN(float64(b)))
}

func near(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*(1+math.Abs(want))
}

var nan = math.NaN()

// checkMat compares got with want: inside the rows x cols region (where
// in(i, j)) to tol, elsewhere bit for bit.
func checkMat[T float](t *testing.T, what string, got, want []T, ld, rows, cols int, tol float64, in func(i, j int) bool) {
	t.Helper()
	require.Len(t, got, len(want))
	for idx := range want {
		i, j := idx%ld, idx/ld
		if i < rows && j < cols && in(i, j) {
			require.True(t, near(float64(got[idx]), float64(want[idx]), tol), "%s (%d,%d): %v, want %v", what, i, j, got[idx], want[idx])
		} else {
			require.True(t, same(got[idx], want[idx]), "%s (%d,%d) outside the result changed: %v, was %v", what, i, j, got[idx], want[idx])
		}
	}
}

func everywhere(int, int) bool { return true }

func TestBLASGemm(t *testing.T) {
	e := newBLASEnv(t)
	testGemm(t, e, &e.b.d)
	testGemm(t, e, &e.b.s)
}

func testGemm[T float](t *testing.T, e *blasEnv, o *blasOps[T]) {
	rng := rand.New(rand.NewPCG(1, 2))
	type shape struct{ m, n, k int }
	for _, sh := range []shape{{5, 3, 4}, {1, 7, 2}, {4, 4, 0}} {
		for _, ta := range []int32{opN, opT, opC} {
			for _, tb := range []int32{opN, opT, opC} {
				for _, scal := range [][2]T{{1.25, 0}, {-0.5, 0.75}, {0, 2}} {
					alpha, beta := scal[0], scal[1]
					m, n, k := sh.m, sh.n, sh.k
					ra, ca := m, k
					if ta != opN {
						ra, ca = k, m
					}
					rb, cb := k, n
					if tb != opN {
						rb, cb = n, k
					}
					lda, ldb, ldc := max(ra, 1)+2, max(rb, 1)+1, m+3
					a := randMat[T](rng, lda, max(ca, 1))
					b := randMat[T](rng, ldb, max(cb, 1))
					c := randMat[T](rng, ldc, n)
					if beta == 0 { // C is not read
						for j := range n {
							for i := range m {
								c[i+j*ldc] = T(nan)
							}
						}
					}
					want := append([]T(nil), c...)
					for j := range n {
						for i := range m {
							s := 0.0
							for l := range k {
								s += at(a, lda, ta != opN, i, l) * at(b, ldb, tb != opN, l, j)
							}
							v := float64(alpha) * s
							if beta != 0 {
								v += float64(beta) * float64(c[i+j*ldc])
							}
							want[i+j*ldc] = T(v)
						}
					}
					pa, pb, pc := upload(e, a), upload(e, b), upload(e, c)
					what := fmt.Sprintf("%sgemm m=%d n=%d k=%d ta=%d tb=%d alpha=%v beta=%v", o.prefix, m, n, k, ta, tb, alpha, beta)
					e.run(what, func() int32 {
						return o.gemm(e.h, ta, tb, int32(m), int32(n), int32(k), &alpha, pa, int32(lda), pb, int32(ldb), &beta, pc, int32(ldc))
					})
					checkMat(t, what, download[T](e, pc, len(c)), want, ldc, m, n, o.tol, everywhere)
					checkMat(t, what+" A", download[T](e, pa, len(a)), a, lda, 0, 0, 0, everywhere)
				}
			}
		}
	}
}

func TestBLASSyrk(t *testing.T) {
	e := newBLASEnv(t)
	testSyrk(t, e, &e.b.d)
	testSyrk(t, e, &e.b.s)
}

func testSyrk[T float](t *testing.T, e *blasEnv, o *blasOps[T]) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, nk := range [][2]int{{5, 3}, {3, 6}, {4, 0}} {
		n, k := nk[0], nk[1]
		for _, uplo := range []int32{lower, upper} {
			for _, trans := range []int32{opN, opT, opC} {
				for _, scal := range [][2]T{{1.5, 0}, {0.75, -0.5}} {
					alpha, beta := scal[0], scal[1]
					ra, ca := n, k
					if trans != opN {
						ra, ca = k, n
					}
					lda, ldc := max(ra, 1)+2, n+1
					a := randMat[T](rng, lda, max(ca, 1))
					c := randMat[T](rng, ldc, n)
					in := func(i, j int) bool { return (uplo == lower) == (i >= j) || i == j }
					want := append([]T(nil), c...)
					for j := range n {
						for i := range n {
							if !in(i, j) {
								continue
							}
							if beta == 0 {
								c[i+j*ldc] = T(nan)
							}
							s := 0.0
							for l := range k {
								s += at(a, lda, trans != opN, i, l) * at(a, lda, trans != opN, j, l)
							}
							v := float64(alpha) * s
							if beta != 0 {
								v += float64(beta) * float64(c[i+j*ldc])
							}
							want[i+j*ldc] = T(v)
						}
					}
					pa, pc := upload(e, a), upload(e, c)
					what := fmt.Sprintf("%ssyrk n=%d k=%d uplo=%d trans=%d alpha=%v beta=%v", o.prefix, n, k, uplo, trans, alpha, beta)
					e.run(what, func() int32 {
						return o.syrk(e.h, uplo, trans, int32(n), int32(k), &alpha, pa, int32(lda), &beta, pc, int32(ldc))
					})
					checkMat(t, what, download[T](e, pc, len(c)), want, ldc, n, n, o.tol, in)
				}
			}
		}
	}
}

// triangle returns a k x k triangular matrix, with leading dimension ld,
// that is well conditioned on the uplo side and NaN elsewhere (and on the
// diagonal when unit), so that reading the wrong part shows.
func triangle[T float](rng *rand.Rand, k, ld int, uplo, diag int32) []T {
	a := randMat[T](rng, ld, k)
	for j := range k {
		for i := range k {
			switch {
			case i == j && diag == unitDia:
				a[i+j*ld] = T(nan)
			case i == j:
				a[i+j*ld] = T(2 + rng.Float64())
				if rng.IntN(2) == 0 {
					a[i+j*ld] = -a[i+j*ld]
				}
			case (i > j) != (uplo == lower):
				a[i+j*ld] = T(nan)
			default:
				a[i+j*ld] *= 0.5
			}
		}
	}
	return a
}

// triAt reads op(A)(i, j) of a triangle from triangle().
func triAt[T float](a []T, ld int, uplo, trans, diag int32, i, j int) float64 {
	if trans != opN {
		i, j = j, i
	}
	switch {
	case i == j && diag == unitDia:
		return 1
	case i != j && (i > j) != (uplo == lower):
		return 0
	}
	return float64(a[i+j*ld])
}

func TestBLASTrsm(t *testing.T) {
	e := newBLASEnv(t)
	testTrsm(t, e, &e.b.d)
	testTrsm(t, e, &e.b.s)
}

func testTrsm[T float](t *testing.T, e *blasEnv, o *blasOps[T]) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, mn := range [][2]int{{5, 3}, {2, 6}} {
		m, n := mn[0], mn[1]
		for _, side := range []int32{left, right} {
			for _, uplo := range []int32{lower, upper} {
				for _, trans := range []int32{opN, opT, opC} {
					for _, diag := range []int32{nonUnit, unitDia} {
						for _, alpha := range []T{1.5, 0} {
							ka := m
							if side == right {
								ka = n
							}
							lda, ldb := ka+2, m+3
							a := triangle[T](rng, ka, lda, uplo, diag)
							b := randMat[T](rng, ldb, n)
							pa, pb := upload(e, a), upload(e, b)
							what := fmt.Sprintf("%strsm m=%d n=%d side=%d uplo=%d trans=%d diag=%d alpha=%v", o.prefix, m, n, side, uplo, trans, diag, alpha)
							e.run(what, func() int32 {
								return o.trsm(e.h, side, uplo, trans, diag, int32(m), int32(n), &alpha, pa, int32(lda), pb, int32(ldb))
							})
							x := download[T](e, pb, len(b))
							// op(A) X (left) or X op(A) (right) must be alpha B.
							got := append([]T(nil), b...)
							want := append([]T(nil), b...)
							for j := range n {
								for i := range m {
									s := 0.0
									for l := range ka {
										if side == left {
											s += triAt(a, lda, uplo, trans, diag, i, l) * float64(x[l+j*ldb])
										} else {
											s += float64(x[i+l*ldb]) * triAt(a, lda, uplo, trans, diag, l, j)
										}
									}
									got[i+j*ldb] = T(s)
									want[i+j*ldb] = T(float64(alpha) * float64(b[i+j*ldb]))
								}
							}
							checkMat(t, what, got, want, ldb, m, n, 10*o.tol, everywhere)
							// Outside the m x n B nothing changed.
							checkMat(t, what, x, b, ldb, m, n, math.Inf(1), everywhere)
						}
					}
				}
			}
		}
	}
}

func TestSolverPotrf(t *testing.T) {
	e := newBLASEnv(t)
	testPotrf(t, e, &e.b.d)
	testPotrf(t, e, &e.b.s)
}

// spd returns an n x n symmetric positive definite matrix, ld apart,
// with NaN in the triangle potrf must not read.
func spd[T float](rng *rand.Rand, n, ld int, uplo int32) []T {
	g := randMat[float64](rng, n, n)
	a := randMat[T](rng, ld, n)
	for j := range n {
		for i := range n {
			if (i > j && uplo == upper) || (i < j && uplo == lower) {
				a[i+j*ld] = T(nan)
				continue
			}
			s := 0.0
			for l := range n {
				s += g[i+l*n] * g[j+l*n]
			}
			if i == j {
				s += float64(n)
			}
			a[i+j*ld] = T(s)
		}
	}
	return a
}

func testPotrf[T float](t *testing.T, e *blasEnv, o *blasOps[T]) {
	rng := rand.New(rand.NewPCG(7, 8))
	const n, lda = 6, 8
	info := upload(e, []int32{-7})
	for _, uplo := range []int32{lower, upper} {
		a := spd[T](rng, n, lda, uplo)
		pa := upload(e, a)
		var lwork int32
		e.do(func() error {
			return status("bufferSize", o.potrfSize(e.sh, uplo, n, pa, lda, &lwork), 0)
		})
		require.Positive(t, lwork)
		work := upload(e, make([]T, lwork))
		what := fmt.Sprintf("%spotrf uplo=%d", o.prefix, uplo)
		e.run(what, func() int32 { return o.potrf(e.sh, uplo, n, pa, lda, work, lwork, info) })
		require.Equal(t, []int32{0}, download[int32](e, info, 1), what)
		f := download[T](e, pa, len(a))
		// L (lower) or Uᵀ (upper): L Lᵀ must be A on the factored triangle.
		l := func(i, j int) float64 {
			if i < j {
				return 0
			}
			if uplo == upper {
				i, j = j, i
			}
			return float64(f[i+j*lda])
		}
		in := func(i, j int) bool { return (uplo == lower) == (i >= j) || i == j }
		got := append([]T(nil), a...)
		for j := range n {
			for i := range n {
				if in(i, j) {
					s := 0.0
					for k := range n {
						s += l(i, k) * l(j, k)
					}
					got[i+j*lda] = T(s)
				}
			}
		}
		checkMat(t, what, got, a, lda, n, n, 10*o.tol, in)
		checkMat(t, what+" untouched", f, a, lda, n, n, math.Inf(1), in)

		// The leading minor of order 3 is not positive definite.
		a = spd[T](rng, n, lda, uplo)
		a[2+2*lda] = -1
		pa = upload(e, a)
		e.run(what+" not SPD", func() int32 { return o.potrf(e.sh, uplo, n, pa, lda, work, lwork, info) })
		require.Equal(t, []int32{3}, download[int32](e, info, 1), what)
	}
	// n = 0 succeeds, and sets devInfo.
	require.NoError(t, e.c.CopyHtoD(e.ctx, info, cuda.Bytes([]int32{-7})))
	e.run("potrf n=0", func() int32 { return o.potrf(e.sh, lower, 0, 0, 1, 0, 0, info) })
	require.Equal(t, []int32{0}, download[int32](e, info, 1))
}

// TestBLASArguments: bad arguments and handles are refused at call time,
// with nothing queued; bad pointers fail the stream.
func TestBLASArguments(t *testing.T) {
	e := newBLASEnv(t)
	d, s := &e.b.d, &e.b.s
	a := upload(e, make([]float64, 64))
	c := upload(e, make([]float64, 64))
	info := upload(e, []int32{0})
	one, onef := 1.0, float32(1)
	var lwork int32
	e.do(func() error {
		return errors.Join(
			status("gemm m<0", d.gemm(e.h, opN, opN, -1, 2, 2, &one, a, 2, a, 2, &one, c, 2), blasInvalidValue),
			status("gemm lda<m", d.gemm(e.h, opN, opN, 3, 2, 2, &one, a, 2, a, 2, &one, c, 3), blasInvalidValue),
			status("gemm lda<k (T)", d.gemm(e.h, opT, opN, 2, 2, 3, &one, a, 2, a, 3, &one, c, 2), blasInvalidValue),
			status("gemm ldb<k", d.gemm(e.h, opN, opN, 2, 2, 3, &one, a, 2, a, 2, &one, c, 2), blasInvalidValue),
			status("gemm ldc<m", s.gemm(e.h, opN, opN, 3, 2, 2, &onef, a, 3, a, 2, &onef, c, 2), blasInvalidValue),
			status("gemm trans", d.gemm(e.h, 5, opN, 2, 2, 2, &one, a, 2, a, 2, &one, c, 2), blasInvalidValue),
			status("gemm no alpha", d.gemm(e.h, opN, opN, 2, 2, 2, nil, a, 2, a, 2, &one, c, 2), blasInvalidValue),
			status("gemm ld 0 on empty", d.gemm(e.h, opN, opN, 0, 2, 2, &one, a, 0, a, 2, &one, c, 0), blasInvalidValue),
			status("gemm empty", d.gemm(e.h, opN, opN, 0, 2, 2, &one, 0, 1, 0, 2, &one, 0, 1), 0),
			status("gemm no handle", d.gemm(0, opN, opN, 2, 2, 2, &one, a, 2, a, 2, &one, c, 2), blasNotInitialized),
			status("gemm solver handle", d.gemm(e.sh, opN, opN, 2, 2, 2, &one, a, 2, a, 2, &one, c, 2), blasNotInitialized),
			status("syrk uplo", d.syrk(e.h, 2, opN, 2, 2, &one, a, 2, &one, c, 2), blasInvalidValue),
			status("syrk k<0", s.syrk(e.h, lower, opN, 2, -2, &onef, a, 2, &onef, c, 2), blasInvalidValue),
			status("syrk lda<k (T)", d.syrk(e.h, lower, opT, 2, 3, &one, a, 2, &one, c, 2), blasInvalidValue),
			status("syrk ldc<n", d.syrk(e.h, upper, opN, 3, 2, &one, a, 3, &one, c, 2), blasInvalidValue),
			status("trsm side", d.trsm(e.h, 2, lower, opN, nonUnit, 2, 2, &one, a, 2, c, 2), blasInvalidValue),
			status("trsm diag", d.trsm(e.h, left, lower, opN, 2, 2, 2, &one, a, 2, c, 2), blasInvalidValue),
			status("trsm lda<n (right)", s.trsm(e.h, right, lower, opN, nonUnit, 2, 3, &onef, a, 2, c, 2), blasInvalidValue),
			status("trsm ldb<m", d.trsm(e.h, left, upper, opT, unitDia, 3, 2, &one, a, 3, c, 2), blasInvalidValue),
			status("trsm n<0", d.trsm(e.h, left, upper, opT, unitDia, 3, -2, &one, a, 3, c, 3), blasInvalidValue),
			status("potrf uplo", d.potrf(e.sh, 2, 2, a, 2, c, 2, info), solverInvalidValue),
			status("potrf lda<n", s.potrf(e.sh, lower, 3, a, 2, c, 3, info), solverInvalidValue),
			status("potrf lwork<0", d.potrf(e.sh, lower, 2, a, 2, c, -1, info), solverInvalidValue),
			status("potrf cuBLAS handle", d.potrf(e.h, lower, 2, a, 2, c, 2, info), solverNotInitialized),
			status("bufferSize n<0", d.potrfSize(e.sh, lower, -1, a, 1, &lwork), solverInvalidValue),
			status("bufferSize no Lwork", s.potrfSize(e.sh, lower, 2, a, 2, nil), solverInvalidValue),
			status("set a bogus stream", e.b.setStream(e.h, 12345), blasInvalidValue),
			status("destroy a bogus handle", e.b.destroy(12345), blasNotInitialized),
			expect("the stream", e.r.streamSynchronize(e.s), cuda.Success),
		)
	})
	st := stats(t, e.lib)
	require.Zero(t, st.Library, "nothing queued")
	require.Zero(t, st.InvalidContext)

	// Handles on a thread without a current context.
	res := make(chan [3]int32, 1)
	go func() {
		runtime.LockOSThread() // a fresh thread, discarded afterwards
		var h uintptr
		res <- [3]int32{e.b.create(&h), e.b.solverCreate(&h), d.gemm(e.h, opN, opN, 2, 2, 2, &one, a, 2, a, 2, &one, c, 2)}
	}()
	require.Equal(t, [3]int32{blasNotInitialized, solverNotInitialized, blasNotInitialized}, <-res)
	st = stats(t, e.lib)
	require.EqualValues(t, 3, st.InvalidContext)
	require.Zero(t, st.Library)

	// Pointers outside live memory fail the stream, stickily: each case on
	// a stream of its own. Extents count the leading dimension: 8 x 8
	// with ld 8 is the whole 64 elements, one more column is not.
	c2 := upload(e, make([]float32, 63))
	cases := []struct {
		what string
		call func() int32
	}{
		{"gemm C past the end", func() int32 {
			return d.gemm(e.h, opN, opN, 8, 9, 1, &one, a, 8, a, 1, &one, c, 8)
		}},
		{"gemm A freed", func() int32 { return d.gemm(e.h, opN, opN, 8, 8, 8, &one, 0xdead, 8, a, 8, &one, c, 8) }},
		{"sgemm C one short", func() int32 {
			return s.gemm(e.h, opN, opN, 8, 8, 1, &onef, a, 8, a, 1, &onef, c2, 8)
		}},
		{"syrk A past the end", func() int32 { return d.syrk(e.h, upper, opT, 8, 9, &one, a, 9, &one, c, 8) }},
		{"trsm B past the end", func() int32 {
			return d.trsm(e.h, right, lower, opN, nonUnit, 8, 8, &one, a, 8, c+8, 8)
		}},
		{"potrf workspace too small", func() int32 { return d.potrf(e.sh, lower, 2, a, 2, c, 65, info) }},
		{"potrf devInfo", func() int32 { return d.potrf(e.sh, lower, 2, a, 2, c, 2, 0) }},
	}
	for _, tc := range cases {
		var str uintptr
		e.do(func() error {
			return errors.Join(
				expect("stream", e.r.streamCreate(&str, 1), cuda.Success),
				status("set", e.b.setStream(e.h, str), 0),
				status("set", e.b.solverSetStream(e.sh, str), 0),
				status(tc.what, tc.call(), 0),
				expect(tc.what, e.r.streamSynchronize(str), cuda.ErrIllegalAddress),
				expect(tc.what+" (sticky)", e.r.streamSynchronize(str), cuda.ErrIllegalAddress),
				expect("destroy", e.r.streamDestroy(str), cuda.Success),
			)
		})
	}
	// A stream destroyed under the handle: the next operation fails.
	e.do(func() error {
		return status("gemm on a destroyed stream", d.gemm(e.h, opN, opN, 2, 2, 2, &one, a, 2, a, 2, &one, c, 2), blasExecutionFailed)
	})
	require.EqualValues(t, len(cases), stats(t, e.lib).Library)

	// On the default stream a fault poisons the context, as a kernel's:
	// the call succeeds, later ones fail.
	e.do(func() error {
		return errors.Join(
			status("default stream", e.b.setStream(e.h, 0), 0),
			status("gemm, faulting", d.gemm(e.h, opN, opN, 8, 9, 1, &one, a, 8, a, 1, &one, c, 8), 0),
			expect("synchronize", e.r.streamSynchronize(0), cuda.ErrIllegalAddress),
			status("gemm after", d.gemm(e.h, opN, opN, 2, 2, 2, &one, a, 2, a, 2, &one, c, 2), blasExecutionFailed),
		)
	})
	require.ErrorIs(t, e.c.Synchronize(e.ctx), cuda.ErrIllegalAddress)
}

// TestBLASStreams: operations run on the handle's stream, not at the call.
func TestBLASStreams(t *testing.T) {
	const delay = 300 * time.Millisecond
	fakecuda.SetDelay(t, delay)
	e := newBLASEnv(t)
	d := &e.b.d
	a := upload(e, []float64{1, 2, 3, 4}) // 2 x 2, column-major
	c := upload(e, []float64{9, 9, 9, 9})
	m := upload(e, []float64{4, 2, 2, 5})
	info := upload(e, []int32{-7})
	one, zero := 1.0, 0.0
	work := upload(e, make([]float64, 2))

	var got uintptr
	e.do(func() error { return status("get", e.b.getStream(e.h, &got), 0) })
	require.Equal(t, e.s, got)

	start := time.Now()
	e.do(func() error {
		return errors.Join(
			status("gemm", d.gemm(e.h, opN, opN, 2, 2, 2, &one, a, 2, a, 2, &zero, c, 2), 0),
			status("potrf", d.potrf(e.sh, lower, 2, m, 2, work, 2, info), 0),
			expect("query", e.r.streamQuery(e.s), cuda.ErrNotReady),
		)
	})
	// The stream is non-blocking: a synchronous copy does not wait for it.
	before := download[float64](e, c, 4)
	infoBefore := download[int32](e, info, 1)
	if time.Since(start) < delay {
		require.Equal(t, []float64{9, 9, 9, 9}, before, "the product is not there before the stream runs")
		require.Equal(t, []int32{-7}, infoBefore)
	}
	e.do(func() error { return expect("sync", e.r.streamSynchronize(e.s), cuda.Success) })
	require.Equal(t, []float64{7, 10, 15, 22}, download[float64](e, c, 4))
	require.Equal(t, []int32{0}, download[int32](e, info, 1))
	require.Equal(t, []float64{2, 1, 2, 2}, download[float64](e, m, 4), "L = [2 0; 1 2], the upper element untouched")

	// On the default stream an operation has run when the call returns.
	e.do(func() error {
		return errors.Join(
			status("default stream", e.b.setStream(e.h, 0), 0),
			status("gemm", d.gemm(e.h, opN, opN, 2, 2, 2, &one, a, 2, a, 2, &one, c, 2), 0),
		)
	})
	require.Equal(t, []float64{14, 20, 30, 44}, download[float64](e, c, 4))
	require.EqualValues(t, 3, stats(t, e.lib).Library)
}

// TestBLASConcurrent runs handles of several Contexts, each on a stream
// of its own, at once.
func TestBLASConcurrent(t *testing.T) {
	const workers, n = 6, 24
	d, lib := open(t, 1, 16<<20)
	r, b := bindRaw(t, lib), bindBLAS(t, lib)
	ctx, shared := newContext(t, d, 0)
	concurrently(t, d, ctx, shared, workers, func(c *cuda.Context, w int) error {
		return blasWork(ctx, c, r, b, float64(w+1), n)
	})
	st := stats(t, lib)
	require.EqualValues(t, workers*3, st.Library)
	require.Zero(t, st.InvalidContext)
	require.Zero(t, st.LiveAllocations)
}

// blasWork factors a·I + ones (n x n) with syrk, potrf and trsm and
// checks the solve.
func blasWork(ctx context.Context, c *cuda.Context, r *raw, b *blasLib, a float64, n int) error {
	p, err := c.Alloc(ctx, 2*8*n*n) // A, then C
	if err != nil {
		return err
	}
	defer func() { _ = c.Free(ctx, p) }()
	q := p + cuda.DevicePtr(8*n*n)
	x, err := c.Alloc(ctx, 8*n+4)
	if err != nil {
		return err
	}
	defer func() { _ = c.Free(ctx, x) }()
	ident := make([]float64, n*n)
	for i := range n {
		ident[i+i*n] = math.Sqrt(a)
	}
	ones := make([]float64, n)
	for i := range ones {
		ones[i] = 1
	}
	if err := errors.Join(c.CopyHtoD(ctx, p, cuda.Bytes(ident)), c.CopyHtoD(ctx, x, cuda.Bytes(ones))); err != nil {
		return err
	}
	info := x + cuda.DevicePtr(8*n)
	err = c.Do(ctx, func() error {
		var s, h, sh uintptr
		one, zero := 1.0, 0.0
		err := errors.Join(
			expect("stream", r.streamCreate(&s, 0), cuda.Success),
			status("create", b.create(&h), 0),
			status("solver", b.solverCreate(&sh), 0),
			status("set", b.setStream(h, s), 0),
			status("set", b.solverSetStream(sh, s), 0),
		)
		if err == nil {
			// C = A Aᵀ = a I (lower; C is unwritten memory, beta 0), C = L Lᵀ with L = √a I, then L x = 1.
			err = errors.Join(
				status("syrk", b.d.syrk(h, lower, opN, int32(n), int32(n), &one, p, int32(n), &zero, q, int32(n)), 0),
				status("potrf", b.d.potrf(sh, lower, int32(n), q, int32(n), 0, 0, info), 0),
				status("trsm", b.d.trsm(h, left, lower, opN, nonUnit, int32(n), 1, &one, q, int32(n), x, int32(n)), 0),
				expect("sync", r.streamSynchronize(s), cuda.Success),
			)
		}
		return errors.Join(err, status("destroy", b.destroy(h), 0), status("destroy", b.solverDestroy(sh), 0),
			expect("destroy", r.streamDestroy(s), cuda.Success))
	})
	if err != nil {
		return err
	}
	got := make([]float64, n)
	if err := c.CopyDtoH(ctx, cuda.Bytes(got), x); err != nil {
		return err
	}
	for i, v := range got {
		if want := 1 / math.Sqrt(a); !near(v, want, 1e-12) {
			return fmt.Errorf("x[%d] = %v, want %v", i, v, want)
		}
	}
	return nil
}
