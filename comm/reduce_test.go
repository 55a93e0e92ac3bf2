package comm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// naive is an independent reference for one element, written with
// explicit branches rather than the builtins the kernels use.
func naiveInt[T integer](op Op, a, b T) T {
	switch op {
	case Sum:
		return a + b
	case Prod:
		return a * b
	case Min:
		if a < b {
			return a
		}
		return b
	case Max:
		if a > b {
			return a
		}
		return b
	case LAnd:
		if a != 0 && b != 0 {
			return 1
		}
		return 0
	case LOr:
		if a != 0 || b != 0 {
			return 1
		}
		return 0
	case BAnd:
		return a & b
	case BOr:
		return a | b
	case BXor:
		return a ^ b
	case LXor:
		if (a != 0) != (b != 0) {
			return 1
		}
		return 0
	}
	panic(op)
}

func checkIntKernel[T integer](t *testing.T, dt Datatype, rng *rand.Rand) {
	for _, op := range []Op{Sum, Prod, Min, Max, LAnd, LOr, LXor, BAnd, BOr, BXor} {
		for _, n := range []int{0, 1, 3, 4, 5, 17, 16, 32, 64, 65, 1000} {
			a, b := make([]T, n), make([]T, n)
			for i := range a {
				// Include zeros (logical ops) and wrapping products.
				a[i], b[i] = T(rng.Uint64()), T(rng.Uint64())
				if i%5 == 0 {
					a[i] = 0
				}
			}
			want := make([]T, n)
			for i := range want {
				want[i] = naiveInt(op, a[i], b[i])
			}
			dst := make([]T, n)
			require.NoError(t, ReduceTo(op, dt, AsBytes(dst), AsBytes(a), AsBytes(b)))
			assert.Equal(t, want, dst, "%v %v n=%d", op, dt, n)
			// In place on either operand.
			require.NoError(t, ReduceInto(op, dt, AsBytes(a), AsBytes(b)))
			assert.Equal(t, want, a, "%v %v n=%d in place", op, dt, n)
		}
	}
}

func TestReduceIntegers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	checkIntKernel[int8](t, Int8, rng)
	checkIntKernel[int16](t, Int16, rng)
	checkIntKernel[int32](t, Int32, rng)
	checkIntKernel[int64](t, Int64, rng)
	checkIntKernel[uint8](t, Uint8, rng)
	checkIntKernel[uint16](t, Uint16, rng)
	checkIntKernel[uint32](t, Uint32, rng)
	checkIntKernel[uint64](t, Uint64, rng)
}

func checkFloatKernel[T float](t *testing.T, dt Datatype, rng *rand.Rand) {
	for _, op := range []Op{Sum, Prod, Min, Max} {
		for _, n := range []int{0, 1, 7, 16, 32, 33, 1000} {
			a, b := make([]T, n), make([]T, n)
			for i := range a {
				a[i], b[i] = T(rng.NormFloat64()), T(rng.NormFloat64())
			}
			dst := make([]T, n)
			require.NoError(t, ReduceTo(op, dt, AsBytes(dst), AsBytes(a), AsBytes(b)))
			for i := range dst {
				var want T
				switch op {
				case Sum:
					want = a[i] + b[i]
				case Prod:
					want = a[i] * b[i]
				case Min:
					want = a[i]
					if b[i] < a[i] {
						want = b[i]
					}
				case Max:
					want = a[i]
					if b[i] > a[i] {
						want = b[i]
					}
				}
				// One IEEE operation: exact equality holds.
				assert.Equal(t, want, dst[i], "%v %v element %d", op, dt, i)
			}
		}
	}
}

func TestReduceFloats(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	checkFloatKernel[float32](t, Float32, rng)
	checkFloatKernel[float64](t, Float64, rng)
}

func TestReduceComplex(t *testing.T) {
	a := []complex128{1 + 2i, -3, 0.5i}
	b := []complex128{2 - 1i, 4 + 4i, 2i}
	dst := make([]complex128, 3)
	require.NoError(t, ReduceTo(Prod, Complex128, AsBytes(dst), AsBytes(a), AsBytes(b)))
	assert.Equal(t, []complex128{4 + 3i, -12 - 12i, -1}, dst)
	require.NoError(t, ReduceTo(Sum, Complex128, AsBytes(dst), AsBytes(a), AsBytes(b)))
	assert.Equal(t, []complex128{3 + 1i, 1 + 4i, 2.5i}, dst)
	a64 := []complex64{1 + 1i}
	require.NoError(t, ReduceInto(Prod, Complex64, AsBytes(a64), AsBytes([]complex64{1i})))
	assert.Equal(t, []complex64{-1 + 1i}, a64)
}

func TestReduceNaNAndZero(t *testing.T) {
	nan := math.NaN()
	a := []float64{nan, 1, math.Copysign(0, -1)}
	b := []float64{1, nan, 0}
	for _, op := range []Op{Min, Max} {
		dst := make([]float64, 3)
		require.NoError(t, ReduceTo(op, Float64, AsBytes(dst), AsBytes(a), AsBytes(b)))
		assert.True(t, math.IsNaN(dst[0]) && math.IsNaN(dst[1]), "%v propagates NaN from either side", op)
	}
	dst := make([]float64, 3)
	require.NoError(t, ReduceTo(Min, Float64, AsBytes(dst), AsBytes(a), AsBytes(b)))
	assert.True(t, math.Signbit(dst[2]), "min(-0, +0) is -0")
}

// TestReduceMinMaxSpecials checks float Min and Max on long buffers (the
// vector path) full of NaNs, infinities and zeros of both signs, in every
// pairing, against Go's builtins.
func TestReduceMinMaxSpecials(t *testing.T) {
	specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 1, -1, 2.5, -2.5, math.MaxFloat64, -math.SmallestNonzeroFloat64}
	var a, b []float64
	for _, x := range specials {
		for _, y := range specials {
			a, b = append(a, x), append(b, y)
		}
	}
	for len(a)%64 != 0 { // whole vector blocks plus no tail confusion
		a, b = append(a, 1), append(b, 2)
	}
	same := func(x, y float64) bool {
		return (math.IsNaN(x) && math.IsNaN(y)) || (x == y && math.Signbit(x) == math.Signbit(y))
	}
	for _, op := range []Op{Min, Max} {
		dst := make([]float64, len(a))
		require.NoError(t, ReduceTo(op, Float64, AsBytes(dst), AsBytes(a), AsBytes(b)))
		a32, b32, dst32 := make([]float32, len(a)), make([]float32, len(a)), make([]float32, len(a))
		for i := range a {
			a32[i], b32[i] = float32(a[i]), float32(b[i])
		}
		require.NoError(t, ReduceTo(op, Float32, AsBytes(dst32), AsBytes(a32), AsBytes(b32)))
		for i := range a {
			want := max(a[i], b[i])
			want32 := max(a32[i], b32[i])
			if op == Min {
				want, want32 = min(a[i], b[i]), min(a32[i], b32[i])
			}
			assert.True(t, same(dst[i], want), "%v(%v, %v) = %v, want %v", op, a[i], b[i], dst[i], want)
			assert.True(t, same(float64(dst32[i]), float64(want32)), "float32 %v(%v, %v) = %v, want %v", op, a32[i], b32[i], dst32[i], want32)
		}
	}
}

func TestReduceErrors(t *testing.T) {
	b8 := make([]byte, 8)
	assert.ErrorIs(t, ReduceInto(Min, Complex64, b8, b8), ErrInvalidArg)
	assert.ErrorIs(t, ReduceInto(BXor, Float64, b8, b8), ErrInvalidArg)
	assert.ErrorIs(t, ReduceInto(NoOp, Int8, b8, b8), ErrInvalidArg)
	assert.ErrorIs(t, ReduceInto(Sum, Invalid, b8, b8), ErrInvalidArg)
	assert.ErrorIs(t, ReduceInto(Sum, Int8, b8, b8[:4]), ErrInvalidArg)
	assert.ErrorIs(t, ReduceInto(Sum, Int64, b8[:6], b8[:6]), ErrInvalidArg)
}

func BenchmarkReduceInto(b *testing.B) {
	for _, dt := range []Datatype{Float64, Float32, Int32, Uint8} {
		for _, op := range []Op{Sum, Max} {
			for _, size := range []int{1 << 10, 64 << 10} {
				b.Run(fmt.Sprintf("%v/%v/bytes=%d", dt, op, size), func(b *testing.B) {
					dst, src := make([]byte, size), make([]byte, size)
					b.SetBytes(int64(size))
					for b.Loop() {
						_ = ReduceInto(op, dt, dst, src)
					}
				})
			}
		}
	}
}
