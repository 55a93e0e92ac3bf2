//go:build mpi

package mpi

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/pzgo/pz/comm"
)

// The C MinLoc and MaxLoc ops compute what comm.FoldLoc computes, for
// every value type, on values with ties, extremes and (floats) NaNs and
// signed zeros.
func TestLocOpsMatchFoldLoc(t *testing.T) {
	testLoc[int8](t, comm.Int8, func(r *rand.Rand) int8 { return int8(r.IntN(7) - 3) }, math.MinInt8, math.MaxInt8)
	testLoc[int16](t, comm.Int16, func(r *rand.Rand) int16 { return int16(r.IntN(7) - 3) }, math.MinInt16, math.MaxInt16)
	testLoc[int32](t, comm.Int32, func(r *rand.Rand) int32 { return int32(r.IntN(7) - 3) }, math.MinInt32, math.MaxInt32)
	testLoc[int64](t, comm.Int64, func(r *rand.Rand) int64 { return int64(r.IntN(7) - 3) }, math.MinInt64, math.MaxInt64)
	testLoc[uint8](t, comm.Uint8, func(r *rand.Rand) uint8 { return uint8(r.IntN(5)) }, 0, math.MaxUint8)
	testLoc[uint16](t, comm.Uint16, func(r *rand.Rand) uint16 { return uint16(r.IntN(5)) }, 0, math.MaxUint16)
	testLoc[uint32](t, comm.Uint32, func(r *rand.Rand) uint32 { return uint32(r.IntN(5)) }, 0, math.MaxUint32)
	testLoc[uint64](t, comm.Uint64, func(r *rand.Rand) uint64 { return uint64(r.IntN(5)) }, 0, math.MaxUint64)
	nan32, nan64 := float32(math.NaN()), math.NaN()
	testLoc[float32](t, comm.Float32, func(r *rand.Rand) float32 { return float32(r.IntN(5)-2) * 0.5 }, float32(math.Inf(-1)), nan32)
	testLoc[float64](t, comm.Float64, func(r *rand.Rand) float64 { return float64(r.IntN(5)-2) * 0.5 }, math.Copysign(0, -1), nan64)
}

func testLoc[T comm.Real](t *testing.T, dt comm.Datatype, val func(*rand.Rand) T, extremes ...T) {
	r := rand.New(rand.NewPCG(uint64(dt), 7))
	const n = 500
	pairs := func() []int64 {
		p := make([]int64, 2*n)
		for i := range n {
			v := val(r)
			if r.IntN(8) == 0 {
				v = extremes[r.IntN(len(extremes))]
			}
			*(*T)(unsafe.Pointer(&p[2*i])) = v
			p[2*i+1] = int64(r.IntN(4))
		}
		return p
	}
	for _, largest := range []bool{false, true} {
		lo, hi := pairs(), pairs()
		want := append([]int64(nil), hi...)
		comm.FoldLoc[T](lo, want, largest)
		got := append([]int64(nil), hi...)
		locCombine(dt, largest, lo, got)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%v largest=%v: word %d is %#x, FoldLoc gives %#x (lo %#x %d, hi %#x %d)", dt, largest, i, got[i], want[i],
					lo[i&^1], lo[i|1], hi[i&^1], hi[i|1])
			}
		}
	}
}
