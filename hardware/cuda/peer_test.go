package cuda_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
)

// TestPeerAccess copies between two devices of the stand-in with
// CopyPeerAsync, without peer access (staged in the real driver) and
// with it, checking the bytes, and lets a kernel of device 0 write
// device 1's memory once peer access is enabled.
func TestPeerAccess(t *testing.T) {
	ctx, cs := fakeContexts(t, 2, 1<<20)
	c0, c1 := cs[0], cs[1]
	d := c0.Driver()
	for _, tc := range []struct {
		dev, peer int
		want      bool
	}{{0, 1, true}, {1, 0, true}, {0, 0, false}} {
		can, err := d.CanAccessPeer(tc.dev, tc.peer)
		require.NoError(t, err)
		require.Equal(t, tc.want, can, "%d -> %d", tc.dev, tc.peer)
	}
	_, err := d.CanAccessPeer(0, 2)
	require.ErrorIs(t, err, cuda.ErrInvalidDevice)
	var none *cuda.Driver
	_, err = none.CanAccessPeer(0, 1)
	require.ErrorIs(t, err, cuda.ErrNoDriver)

	const n, off = 4096, 64
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	p0, err := c0.Alloc(ctx, n)
	require.NoError(t, err)
	require.NoError(t, c0.CopyHtoD(ctx, p0, src))
	p1, err := c1.Alloc(ctx, n+off)
	require.NoError(t, err)
	require.NoError(t, c1.Memset8(ctx, p1, 0, n+off))
	s0 := fakeStream(t, ctx, c0)
	s1 := fakeStream(t, ctx, c1)

	// Without peer access, from device 0 to device 1 at an offset, on a
	// stream of device 0.
	require.NoError(t, c0.CopyPeerAsync(ctx, p1+off, c1, p0, c0, n, s0))
	require.NoError(t, s0.Synchronize(ctx))
	got := make([]byte, n+off)
	require.NoError(t, c1.CopyDtoH(ctx, got, p1))
	require.Equal(t, make([]byte, off), got[:off], "before the offset")
	require.True(t, bytes.Equal(src, got[off:]), "copied byte for byte")

	require.NoError(t, c0.EnablePeerAccess(ctx, c1))
	require.ErrorIs(t, c0.EnablePeerAccess(ctx, c1), cuda.ErrPeerAccessAlreadyEnabled)
	require.ErrorIs(t, c0.EnablePeerAccess(ctx, c0), cuda.ErrInvalidContext, "a device is not its own peer")
	require.ErrorIs(t, c0.EnablePeerAccess(ctx, nil), cuda.ErrBadArgument)

	// Back, from device 1 to device 0, on a stream of device 1.
	require.NoError(t, c0.Memset8(ctx, p0, 0, n))
	require.NoError(t, c1.CopyPeerAsync(ctx, p0, c0, p1+off, c1, n, s1))
	require.NoError(t, s1.Synchronize(ctx))
	back := make([]byte, n)
	require.NoError(t, c0.CopyDtoH(ctx, back, p0))
	require.True(t, bytes.Equal(src, back), "copied back byte for byte")

	// With access enabled, a kernel of device 0 writes device 1's memory.
	f := fakeKernel(t, ctx, c0, "pz_fill_f64")
	require.NoError(t, fill(ctx, c0, f, p1, 4, n/8, s0))
	require.NoError(t, s0.Synchronize(ctx))
	require.NoError(t, c1.CopyDtoH(ctx, got[:n], p1))
	require.Equal(t, []float64{4, 4, 4}, cuda.Slice[float64](got[:n])[:3])

	require.NoError(t, c0.DisablePeerAccess(ctx, c1))
	require.ErrorIs(t, c0.DisablePeerAccess(ctx, c1), cuda.ErrPeerAccessNotEnabled)
	require.NoError(t, c0.CopyPeerAsync(ctx, p1, c1, p0, c0, 0, s0), "nothing to copy")
	require.ErrorIs(t, c0.CopyPeerAsync(ctx, p1, c1, p0, c0, -1, s0), cuda.ErrBadArgument)
	require.ErrorIs(t, c0.CopyPeerAsync(ctx, p1, nil, p0, c0, 8, s0), cuda.ErrBadArgument)
	require.ErrorIs(t, c0.CopyPeerAsync(ctx, p1, c1, p0, c0, 2*n, s0), cuda.ErrInvalidValue, "beyond the allocation")
}

// TestPeerCopyOrder checks that CopyPeerAsync is ordered on its stream:
// with the stand-in's streams waiting before each operation, a copy
// queued after a memset on the same stream sees the memset's bytes.
func TestPeerCopyOrder(t *testing.T) {
	fakecuda.SetDelay(t, 500*time.Microsecond)
	ctx, cs := fakeContexts(t, 2, 1<<20)
	c0, c1 := cs[0], cs[1]
	const n = 1024
	p0, err := c0.Alloc(ctx, n)
	require.NoError(t, err)
	p1, err := c1.Alloc(ctx, n)
	require.NoError(t, err)
	s := fakeStream(t, ctx, c0)
	require.NoError(t, c0.Memset8Async(ctx, p0, 0x5c, n, s))
	require.NoError(t, c0.CopyPeerAsync(ctx, p1, c1, p0, c0, n, s))
	require.NoError(t, s.Synchronize(ctx))
	got := make([]byte, n)
	require.NoError(t, c1.CopyDtoH(ctx, got, p1))
	require.Equal(t, bytes.Repeat([]byte{0x5c}, n), got)
}
