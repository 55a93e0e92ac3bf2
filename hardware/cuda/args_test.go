package cuda

import (
	"encoding/binary"
	"math"
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
