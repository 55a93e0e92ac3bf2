//go:build mpi

package mpi_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/mpi"
)

// sameBits compares element by element; two NaNs are the same whatever
// their payload bits (Go's min on a NaN returns a NaN of its own making).
func sameBits(dt comm.Datatype, a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	switch dt {
	case comm.Float64:
		x, y := unsafe.Slice((*float64)(unsafe.Pointer(&a[0])), len(a)/8), unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), len(b)/8)
		for i := range x {
			if math.Float64bits(x[i]) != math.Float64bits(y[i]) && !(math.IsNaN(x[i]) && math.IsNaN(y[i])) {
				return false
			}
		}
		return true
	case comm.Float32:
		x, y := unsafe.Slice((*float32)(unsafe.Pointer(&a[0])), len(a)/4), unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) && !(x[i] != x[i] && y[i] != y[i]) {
				return false
			}
		}
		return true
	}
	return bytes.Equal(a, b)
}

// TestAgreePayloadMatchesReduceInto checks that the C reduction an
// AllReduce of up to 64 bytes takes inside the agreement step gives, for
// every type and op it accepts, bit for bit what comm.ReduceInto (and so
// comm/local) gives: wrapping integer sums and products, logical ops as 0
// or 1, Go's NaN and signed-zero rules for float Min and Max (a NaN's payload
// bits aside).
func TestAgreePayloadMatchesReduceInto(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	specials64 := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 1, -1, math.MaxFloat64, 5e-324}
	fill := func(dt comm.Datatype, b []byte) {
		switch dt {
		case comm.Float64:
			f := unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), len(b)/8)
			for i := range f {
				f[i] = specials64[rng.IntN(len(specials64))]
			}
		case comm.Float32:
			f := unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
			for i := range f {
				f[i] = float32(specials64[rng.IntN(len(specials64))])
			}
		default:
			for i := range b {
				b[i] = byte(rng.Uint32())
				if rng.IntN(4) == 0 {
					b[i] = 0 // zero elements for the logical ops
				}
			}
		}
	}
	carried := 0
	for dt := comm.Int8; dt <= comm.Complex128; dt++ {
		for op := comm.Sum; op <= comm.LXor; op++ {
			code := mpi.PayCode(dt, op, 64)
			if dt >= comm.Complex64 || !op.Supports(dt) {
				if code != 0 {
					t.Errorf("%v on %v rides in the agreement step; it should not", op, dt)
				}
				continue
			}
			if code == 0 {
				t.Errorf("%v on %v does not ride in the agreement step", op, dt)
				continue
			}
			carried++
			for range 50 {
				n := dt.Size() * (1 + rng.IntN(64/dt.Size()))
				a, b := make([]byte, n), make([]byte, n)
				fill(dt, a)
				fill(dt, b)
				want := bytes.Clone(b)
				if err := comm.ReduceInto(op, dt, want, a); err != nil {
					t.Fatal(err)
				}
				got, ok := mpi.CombinePayload(dt, op, a, b)
				if !ok || !sameBits(dt, got, want) {
					t.Fatalf("%v on %v: combine(%x, %x) = %x (combined %v), ReduceInto gives %x", op, dt, a, b, got, ok, want)
				}
			}
		}
	}
	if carried == 0 {
		t.Fatal("no type and op rides in the agreement step")
	}
	// Too large, a user op, nothing to carry: the ordinary path.
	for _, c := range []int64{mpi.PayCode(comm.Float64, comm.Sum, 72), mpi.PayCode(comm.Float64, comm.User, 8), mpi.PayCode(comm.Int32, comm.Sum, 0)} {
		if c != 0 {
			t.Errorf("payCode = %#x, want 0", c)
		}
	}
}
