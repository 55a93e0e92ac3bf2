package cuda_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
)

// TestIsPinned asks the stand-in driver about memory from AllocHost,
// AllocHostFlags and HostRegister (pinned, anywhere inside) and about
// ordinary Go memory (not pinned), and lets a kernel write mapped host
// memory through its device address.
func TestIsPinned(t *testing.T) {
	ctx, cs := fakeContexts(t, 1, 1<<20)
	c := cs[0]
	pinned := func(b []byte) bool {
		t.Helper()
		ok, err := c.IsPinned(ctx, b)
		require.NoError(t, err)
		return ok
	}

	h, err := c.AllocHost(ctx, 100)
	require.NoError(t, err)
	defer func() { assert.NoError(t, c.FreeHost(ctx, h)) }()
	require.True(t, pinned(h))
	require.True(t, pinned(h[10:20]), "inside")
	require.True(t, pinned(h[99:]), "the last byte")
	require.False(t, pinned(nil))

	goMem := make([]byte, 8192)
	require.False(t, pinned(goMem), "a Go slice")
	var pin runtime.Pinner
	pin.Pin(&goMem[0])
	defer pin.Unpin()
	require.NoError(t, c.HostRegister(ctx, goMem[:4096]))
	require.True(t, pinned(goMem[:4096]), "registered")
	require.True(t, pinned(goMem[100:200]), "inside the registered range")
	require.False(t, pinned(goMem), "runs past the registered range")
	require.False(t, pinned(goMem[4096:]))
	require.NoError(t, c.HostUnregister(ctx, goMem[:4096]))
	require.False(t, pinned(goMem[:4096]), "unregistered")

	// Mapped memory: a kernel fills it through its device address.
	const n = 512 // float64s
	m, err := c.AllocHostFlags(ctx, 8*n, cuda.HostAllocPortable|cuda.HostAllocDeviceMap)
	require.NoError(t, err)
	defer func() { assert.NoError(t, c.FreeHost(ctx, m)) }()
	require.True(t, pinned(m))
	dp, err := c.HostDevicePtr(ctx, m)
	require.NoError(t, err)
	f := fakeKernel(t, ctx, c, "pz_fill_f64")
	require.NoError(t, fill(ctx, c, f, dp, 1.5, n, nil))
	require.NoError(t, c.Synchronize(ctx))
	for i, v := range cuda.Slice[float64](m) {
		require.Equal(t, 1.5, v, "element %d", i)
	}

	_, err = c.HostDevicePtr(ctx, goMem)
	require.ErrorIs(t, err, cuda.ErrInvalidValue, "unmapped")
	_, err = c.HostDevicePtr(ctx, nil)
	require.ErrorIs(t, err, cuda.ErrBadArgument)
	_, err = c.AllocHostFlags(ctx, 0, 0)
	require.ErrorIs(t, err, cuda.ErrBadArgument)
	_, err = c.AllocHostFlags(ctx, 64, 0x80)
	require.ErrorIs(t, err, cuda.ErrInvalidValue, "an unknown flag")
}
