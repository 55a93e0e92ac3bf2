package cuda_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
)

// These tests check the stream-ordered allocator, host functions, pinned
// memory detection and peer copies against the real driver; without a
// GPU they skip. Only what the driver documents is asserted, not the
// stand-in's choices (such as releasing pool memory as soon as the free
// is reached).

// TestGPUPinnedMemory checks IsPinned and HostDevicePtr on the driver,
// which refuses pageable memory with CUDA_ERROR_INVALID_VALUE.
func TestGPUPinnedMemory(t *testing.T) {
	ctx, c := openContext(t)
	h, err := c.AllocHost(ctx, 4096)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.FreeHost(ctx, h)) }()
	m, err := c.AllocHostFlags(ctx, 4096, cuda.HostAllocPortable|cuda.HostAllocDeviceMap)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.FreeHost(ctx, m)) }()
	for _, tc := range []struct {
		name string
		b    []byte
		want bool
	}{
		{"AllocHost", h, true},
		{"AllocHost inside", h[100:200], true},
		{"AllocHostFlags", m, true},
		{"Go slice", make([]byte, 4096), false},
	} {
		got, err := c.IsPinned(ctx, tc.b)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, got, tc.name)
	}
	dp, err := c.HostDevicePtr(ctx, m)
	require.NoError(t, err)
	require.NotZero(t, dp)
}

// TestGPUStreamOrderedAllocation allocates from the default pool on a
// stream, sets and copies the memory out on the stream, checks the copy
// from a host function queued after it, and frees the memory on the
// stream; the pool keeps it under an infinite release threshold until
// TrimTo.
func TestGPUStreamOrderedAllocation(t *testing.T) {
	ctx, c := openContext(t)
	pool, err := c.DefaultMemPool(ctx)
	if errors.Is(err, cuda.ErrNotSupported) {
		t.Skipf("no memory pools: %v", err)
	}
	require.NoError(t, err)
	require.NoError(t, pool.SetReleaseThreshold(ctx, math.MaxUint64))
	defer func() { require.NoError(t, pool.SetReleaseThreshold(ctx, 0)) }()
	s, err := c.NewStream(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Destroy(ctx)) }()
	const n = 64 << 20
	out, err := c.AllocHost(ctx, n)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.FreeHost(ctx, out)) }()

	p, err := c.AllocAsync(ctx, n, s)
	require.NoError(t, err)
	require.NoError(t, c.Memset8Async(ctx, p, 3, n, s))
	require.NoError(t, c.CopyDtoHAsync(ctx, out, p, s))
	done, err := c.LaunchHostFunc(ctx, func() error {
		if !bytes.Equal(out, bytes.Repeat([]byte{3}, n)) {
			return fmt.Errorf("the host function ran before the copy: %v", out[:8])
		}
		return nil
	}, s)
	require.NoError(t, err)
	require.NoError(t, c.FreeAsync(ctx, p, s))
	require.NoError(t, s.Synchronize(ctx))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(gpuTimeout):
		t.Fatal("the host function did not run")
	}
	used, err := pool.Used(ctx)
	require.NoError(t, err)
	require.Zero(t, used)
	reserved, err := pool.Reserved(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, reserved, uint64(n), "kept under the threshold")
	require.NoError(t, pool.TrimTo(ctx, 0))
	trimmed, err := pool.Reserved(ctx)
	require.NoError(t, err)
	require.Less(t, trimmed, reserved)
}

// TestGPUPeerCopy copies between the first two GPUs, if there are two,
// with CopyPeerAsync, and enables peer access where they have it.
func TestGPUPeerCopy(t *testing.T) {
	ctx, c0 := openContext(t)
	d := c0.Driver()
	if n, err := d.DeviceCount(); err != nil || n < 2 {
		t.Skipf("one GPU: no peer to copy to (%v)", err)
	}
	c1, err := d.NewContext(ctx, 1)
	require.NoError(t, err)
	defer func() { require.NoError(t, c1.Close()) }()
	can, err := d.CanAccessPeer(0, 1)
	require.NoError(t, err)
	if can {
		err := c0.EnablePeerAccess(ctx, c1)
		if !errors.Is(err, cuda.ErrPeerAccessAlreadyEnabled) {
			require.NoError(t, err)
		}
		require.ErrorIs(t, c0.EnablePeerAccess(ctx, c1), cuda.ErrPeerAccessAlreadyEnabled)
		defer func() { require.NoError(t, c0.DisablePeerAccess(ctx, c1)) }()
	}
	const n = 1 << 20
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	p0, err := c0.Alloc(ctx, n)
	require.NoError(t, err)
	defer func() { require.NoError(t, c0.Free(ctx, p0)) }()
	p1, err := c1.Alloc(ctx, n)
	require.NoError(t, err)
	defer func() { require.NoError(t, c1.Free(ctx, p1)) }()
	require.NoError(t, c0.CopyHtoD(ctx, p0, src))
	s, err := c0.NewStream(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Destroy(ctx)) }()
	require.NoError(t, c0.CopyPeerAsync(ctx, p1, c1, p0, c0, n, s))
	require.NoError(t, s.Synchronize(ctx))
	got := make([]byte, n)
	require.NoError(t, c1.CopyDtoH(ctx, got, p1))
	require.True(t, bytes.Equal(src, got), "peer access %v", can)
}
