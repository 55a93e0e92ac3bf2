package comm

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

type celsius float64
type count int
type byteish uint8

func TestDatatypeOf(t *testing.T) {
	assert.Equal(t, Int8, DatatypeOf[int8]())
	assert.Equal(t, Int16, DatatypeOf[int16]())
	assert.Equal(t, Int32, DatatypeOf[int32]())
	assert.Equal(t, Int64, DatatypeOf[int64]())
	assert.Equal(t, Int64, DatatypeOf[int]())
	assert.Equal(t, Uint8, DatatypeOf[uint8]())
	assert.Equal(t, Uint16, DatatypeOf[uint16]())
	assert.Equal(t, Uint32, DatatypeOf[uint32]())
	assert.Equal(t, Uint64, DatatypeOf[uint64]())
	assert.Equal(t, Uint64, DatatypeOf[uint]())
	assert.Equal(t, Uint64, DatatypeOf[uintptr]())
	assert.Equal(t, Float32, DatatypeOf[float32]())
	assert.Equal(t, Float64, DatatypeOf[float64]())
	assert.Equal(t, Complex64, DatatypeOf[complex64]())
	assert.Equal(t, Complex128, DatatypeOf[complex128]())
	assert.Equal(t, Float64, DatatypeOf[celsius]())
	assert.Equal(t, Int64, DatatypeOf[count]())
	assert.Equal(t, Uint8, DatatypeOf[byteish]())
}

func TestBufOf(t *testing.T) {
	s := []int32{1, 2, 3}
	b := BufOf(s)
	assert.Equal(t, Int32, b.Type)
	assert.Equal(t, 3, b.Len())
	b.Bytes[0] = 9 // aliases s (little endian)
	assert.Equal(t, int32(9), s[0])
	e := BufOf([]float64{})
	assert.Nil(t, e.Bytes)
	assert.Equal(t, Float64, e.Type)
	assert.Equal(t, 0, e.Len())
}

func TestConcat(t *testing.T) {
	// Parts sliced back to back from one array (keeping its capacity) come
	// back without a copy.
	all := []int{1, 2, 3, 4, 5}
	parts := [][]int{all[0:2], all[2:2], all[2:5]}
	flat, counts := concat(parts)
	assert.Equal(t, []int{2, 0, 3}, counts)
	assert.Equal(t, all, flat)
	assert.Same(t, &all[0], &flat[0])
	// Scattered parts are copied.
	flat, counts = concat([][]int{{1}, {}, {2, 3}})
	assert.Equal(t, []int{1, 2, 3}, flat)
	assert.Equal(t, []int{1, 0, 2}, counts)
	// Out-of-order views are copied too.
	flat, _ = concat([][]int{all[2:3], all[0:1]})
	assert.Equal(t, []int{3, 1}, flat)
	flat, counts = concat([][]int{nil, {}})
	assert.Empty(t, flat)
	assert.Equal(t, []int{0, 0}, counts)
	// Appending to a view never overwrites its neighbour.
	parts = views(all, []int{2, 3})
	_ = append(parts[0], 99)
	assert.Equal(t, 3, parts[1][0])
}

// MakeSlice makes each datatype's Go slice; BufOfSlice views any numeric
// slice held in an interface, and refuses anything else.
func TestMakeSliceAndBufOfSlice(t *testing.T) {
	for dt := Int8; dt <= Complex128; dt++ {
		s, b := MakeSlice(dt, 3)
		if b.Type != dt || b.Len() != 3 {
			t.Errorf("MakeSlice(%v, 3): %T, %v elements of %v", dt, s, b.Len(), b.Type)
		}
		if v, ok := BufOfSlice(s); !ok || v.Type != dt || len(v.Bytes) != 3*dt.Size() {
			t.Errorf("BufOfSlice(%T): %v, %v", s, v, ok)
		}
	}
	if s, _ := MakeSlice(Invalid, 3); s != nil {
		t.Errorf("MakeSlice(Invalid) = %T", s)
	}
	x := []float64{1, 2}
	b, ok := BufOfSlice(x)
	if !ok || &b.Bytes[0] != (*byte)(unsafe.Pointer(&x[0])) {
		t.Errorf("BufOfSlice copies or fails: %v", ok)
	}
	for _, bad := range []any{"s", []string{"a"}, 3.0, nil} {
		if _, ok := BufOfSlice(bad); ok {
			t.Errorf("BufOfSlice(%T) accepted", bad)
		}
	}
}
