package cuda

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nativeBytes returns the first n bytes of slot as the driver reads them
// through the parameter pointer.
func nativeBytes(slot *uint64, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(slot)), n)
}

func TestPackArgs(t *testing.T) {
	vals, err := packArgs([]any{
		DevicePtr(0x7f0012345678), float32(1.5), int32(-2), uint32(7), float64(-0.25), int64(-3), uint64(1 << 40), uintptr(9),
	})
	require.NoError(t, err)
	require.Len(t, vals, 8)
	ne := binary.NativeEndian
	assert.Equal(t, uint64(0x7f0012345678), ne.Uint64(nativeBytes(&vals[0], 8)))
	assert.Equal(t, math.Float32bits(1.5), ne.Uint32(nativeBytes(&vals[1], 4)))
	assert.Equal(t, uint32(0xfffffffe), ne.Uint32(nativeBytes(&vals[2], 4)))
	assert.Equal(t, uint32(7), ne.Uint32(nativeBytes(&vals[3], 4)))
	assert.Equal(t, math.Float64bits(-0.25), ne.Uint64(nativeBytes(&vals[4], 8)))
	assert.Equal(t, uint64(math.MaxUint64-2), ne.Uint64(nativeBytes(&vals[5], 8)))
	assert.Equal(t, uint64(1<<40), ne.Uint64(nativeBytes(&vals[6], 8)))
	assert.Equal(t, uint64(9), ne.Uint64(nativeBytes(&vals[7], 8)))

	for _, bad := range []any{1, "s", []float32{1}, nil, int16(1)} {
		_, err := packArgs([]any{int32(0), bad})
		assert.ErrorIs(t, err, ErrBadArgument, "%T", bad)
	}
	vals, err = packArgs(nil)
	require.NoError(t, err)
	assert.Empty(t, vals)
}

func TestFormatUUID(t *testing.T) {
	u := [16]byte{0x2a, 0x3b, 0x4c, 0x5d, 0x6e, 0x7f, 0x80, 0x91, 0xa2, 0xb3, 0xc4, 0xd5, 0xe6, 0xf7, 0x08, 0x19}
	assert.Equal(t, "GPU-2a3b4c5d-6e7f-8091-a2b3-c4d5e6f70819", formatUUID(u))
}

func TestDim3(t *testing.T) {
	assert.Equal(t, Dim3{128, 1, 1}, Dim3{X: 128}.norm())
	assert.Equal(t, Dim3{1, 1, 1}, Dim3{}.norm())
	assert.Equal(t, Dim3{2, 3, 4}, Dim3{2, 3, 4}.norm())
}

func TestCString(t *testing.T) {
	b := []byte("CUDA_ERROR_INVALID_VALUE\x00junk")
	assert.Equal(t, "CUDA_ERROR_INVALID_VALUE", cString(&b[0]))
	assert.Equal(t, "", cString(nil))
}

// TestMemcpy2DLayout checks memcpy2D against CUDA_MEMCPY2D's offsets in
// cuda.h on a 64-bit host: the driver reads the struct by offset.
func TestMemcpy2DLayout(t *testing.T) {
	var p memcpy2D
	offsets := []struct {
		name string
		got  uintptr
		want uintptr
	}{
		{"srcMemoryType", unsafe.Offsetof(p.srcMemoryType), 16},
		{"srcHost", unsafe.Offsetof(p.srcHost), 24},
		{"srcDevice", unsafe.Offsetof(p.srcDevice), 32},
		{"srcArray", unsafe.Offsetof(p.srcArray), 40},
		{"srcPitch", unsafe.Offsetof(p.srcPitch), 48},
		{"dstXInBytes", unsafe.Offsetof(p.dstXInBytes), 56},
		{"dstY", unsafe.Offsetof(p.dstY), 64},
		{"dstMemoryType", unsafe.Offsetof(p.dstMemoryType), 72},
		{"dstHost", unsafe.Offsetof(p.dstHost), 80},
		{"dstDevice", unsafe.Offsetof(p.dstDevice), 88},
		{"dstArray", unsafe.Offsetof(p.dstArray), 96},
		{"dstPitch", unsafe.Offsetof(p.dstPitch), 104},
		{"WidthInBytes", unsafe.Offsetof(p.widthInBytes), 112},
		{"Height", unsafe.Offsetof(p.height), 120},
	}
	for _, o := range offsets {
		if o.got != o.want {
			t.Errorf("%s at offset %d, cuda.h has it at %d", o.name, o.got, o.want)
		}
	}
	if s := unsafe.Sizeof(p); s != 128 {
		t.Errorf("memcpy2D is %d bytes, CUDA_MEMCPY2D 128", s)
	}
}

// TestCopy2DChecks feeds the 2-D copy shapes the driver would reject or
// that would read past the host slice.
func TestCopy2DChecks(t *testing.T) {
	for _, c := range []struct {
		cp   Copy2D
		want string
	}{
		{Copy2D{Host: make([]byte, 10), Pitch: 4, Rows: 2, Width: 8}, "pitch 4 (device 0) below the width 8"},
		{Copy2D{Host: make([]byte, 10), Pitch: 8, Rows: 2, Width: 8}, "need 16 host bytes, have 10"},
		{Copy2D{Host: make([]byte, 16), Pitch: 8, Rows: -1, Width: 8}, "of -1 rows"},
		{Copy2D{Host: make([]byte, 16), Pitch: 8, DevicePitch: 4, Rows: 2, Width: 8}, "below the width"},
	} {
		err := c.cp.check("copy")
		if err == nil || !errors.Is(err, ErrBadArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want ErrBadArgument saying %q", c.cp, err, c.want)
		}
	}
	if err := (&Copy2D{Host: make([]byte, 12), Pitch: 8, Rows: 2, Width: 4}).check("copy"); err != nil {
		t.Errorf("a tile of 2 rows of 4 bytes, pitch 8, in 12 bytes: %v", err)
	}
}
