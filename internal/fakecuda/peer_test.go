package fakecuda_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
)

// TestPeerKernels checks what peer access means in the stand-in: kernels
// of a device may use another device's memory only while access from
// its context to the other's is enabled, one way, and access ends with
// the peer's primary context.
func TestPeerKernels(t *testing.T) {
	d, _ := open(t, 2, 1<<20)
	ctx, c0 := newContext(t, d, 0)
	_, c1 := newContext(t, d, 1)
	k0 := kernels(t, ctx, c0)
	k1 := kernels(t, ctx, c1)
	const n = 64
	p0, err := c0.Alloc(ctx, 8*n)
	require.NoError(t, err)
	p1, err := c1.Alloc(ctx, 8*n)
	require.NoError(t, err)
	// fill runs pz_fill_f64 over p on a fresh stream of c.
	fill := func(c *cuda.Context, k map[string]*cuda.Function, p cuda.DevicePtr) error {
		s, err := c.NewStream(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, s.Destroy(ctx)) }()
		if err := launch(ctx, c, k["pz_fill_f64"], n, s, p, 6.0, uint64(n)); err != nil {
			return err
		}
		return s.Synchronize(ctx)
	}

	require.ErrorIs(t, fill(c0, k0, p1), cuda.ErrIllegalAddress, "no peer access")
	require.NoError(t, c0.EnablePeerAccess(ctx, c1))
	require.NoError(t, fill(c0, k0, p1), "device 0 may use device 1's memory")
	out := make([]float64, n)
	require.NoError(t, c1.CopyDtoH(ctx, cuda.Bytes(out), p1))
	require.Equal(t, 6.0, out[n-1])
	require.ErrorIs(t, fill(c1, k1, p0), cuda.ErrIllegalAddress, "one way")
	require.NoError(t, c0.DisablePeerAccess(ctx, c1))
	require.ErrorIs(t, fill(c0, k0, p1), cuda.ErrIllegalAddress, "disabled")

	// Access ends when the peer's primary context is destroyed.
	require.NoError(t, c0.EnablePeerAccess(ctx, c1))
	require.NoError(t, c1.Close())
	require.ErrorIs(t, c0.EnablePeerAccess(ctx, c1), cuda.ErrInvalidContext, "a released context")
	require.ErrorIs(t, c0.CopyPeerAsync(ctx, p1, c1, p0, c0, 8, nil), cuda.ErrInvalidContext)
	_, c1 = newContext(t, d, 1)
	require.NoError(t, c0.EnablePeerAccess(ctx, c1), "not enabled for the new context")
}
