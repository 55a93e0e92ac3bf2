package cuda_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
)

// fakeKernelsPTX names the stand-in driver's built-in kernels that these
// tests launch; the stand-in reads only the names after .entry.
const fakeKernelsPTX = `
.version 7.0
.target sm_52
.address_size 64
.visible .entry pz_fill_f64(.param .u64 x, .param .f64 v, .param .u64 n) { ret; }
.visible .entry pz_wait_u32(.param .u64 flag) { ret; }
`

// fakeTimeout bounds every wait of these tests.
const fakeTimeout = 30 * time.Second

// fakeContexts loads a fresh instance of the stand-in driver with
// devices GPUs of memory bytes and returns a Context on each, closed at
// the end of the test, and a context.Context with a deadline (so that
// the Synchronize methods poll).
func fakeContexts(t *testing.T, devices int, memory int64) (context.Context, []*cuda.Context) {
	t.Helper()
	d, _ := fakecuda.Open(t, devices, memory)
	ctx, cancel := context.WithTimeout(context.Background(), fakeTimeout)
	t.Cleanup(cancel)
	cs := make([]*cuda.Context, devices)
	for i := range cs {
		c, err := d.NewContext(ctx, i)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, c.Close()) })
		cs[i] = c
	}
	return ctx, cs
}

// fakeStream creates a stream of c.
func fakeStream(t *testing.T, ctx context.Context, c *cuda.Context) *cuda.Stream {
	t.Helper()
	s, err := c.NewStream(ctx)
	require.NoError(t, err)
	return s
}

// fakeKernel loads fakeKernelsPTX in c and returns its kernel name.
func fakeKernel(t *testing.T, ctx context.Context, c *cuda.Context, name string) *cuda.Function {
	t.Helper()
	m, err := c.LoadPTX(ctx, fakeKernelsPTX)
	require.NoError(t, err)
	f, err := m.Function(ctx, name)
	require.NoError(t, err)
	return f
}

// fill launches pz_fill_f64 over n float64s at p on s: p[i] = v.
func fill(ctx context.Context, c *cuda.Context, f *cuda.Function, p cuda.DevicePtr, v float64, n int, s *cuda.Stream) error {
	return c.Launch(ctx, f, cuda.Dim3{X: uint32((n + 255) / 256)}, cuda.Dim3{X: 256}, 0, s, p, v, uint64(n))
}

// used returns total minus free device memory.
func used(t *testing.T, ctx context.Context, c *cuda.Context) uint64 {
	t.Helper()
	free, total, err := c.MemInfo(ctx)
	require.NoError(t, err)
	return total - free
}

// TestStreamOrderedAllocation allocates from the default pool on a
// stream, fills the memory with a kernel queued after the allocation on
// that stream and reads it back, then frees it on the stream: the pool
// keeps the memory (its release threshold is infinite), which MemInfo
// counts as used, reuses it for the next allocation, and gives it back
// on TrimTo. The stand-in's streams wait before each operation, so an
// allocation the stream had not reached would fault the kernel.
func TestStreamOrderedAllocation(t *testing.T) {
	fakecuda.SetDelay(t, 200*time.Microsecond)
	ctx, cs := fakeContexts(t, 1, 16<<20)
	c := cs[0]
	s := fakeStream(t, ctx, c)
	f := fakeKernel(t, ctx, c, "pz_fill_f64")
	pool, err := c.DefaultMemPool(ctx)
	require.NoError(t, err)
	th, err := pool.ReleaseThreshold(ctx)
	require.NoError(t, err)
	require.Zero(t, th, "the default threshold")
	require.NoError(t, pool.SetReleaseThreshold(ctx, math.MaxUint64))
	th, err = pool.ReleaseThreshold(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(math.MaxUint64), th)
	base := used(t, ctx, c)

	const n = 4096 // float64s
	p, err := c.AllocAsync(ctx, 8*n, s)
	require.NoError(t, err)
	require.NoError(t, fill(ctx, c, f, p, 2.5, n, s))
	out := make([]float64, n)
	// Pageable memory: the copy waits for the stream, then completes.
	require.NoError(t, c.CopyDtoHAsync(ctx, cuda.Bytes(out), p, s))
	for i, v := range out {
		require.Equal(t, 2.5, v, "element %d", i)
	}
	inUse, err := pool.Used(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, inUse, uint64(8*n))
	reserved, err := pool.Reserved(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, reserved, uint64(8*n))
	require.Equal(t, base+reserved, used(t, ctx, c), "MemInfo counts the pool's memory")

	require.NoError(t, c.FreeAsync(ctx, p, s))
	require.NoError(t, s.Synchronize(ctx))
	inUse, err = pool.Used(ctx)
	require.NoError(t, err)
	require.Zero(t, inUse, "the free was reached")
	kept, err := pool.Reserved(ctx)
	require.NoError(t, err)
	require.Equal(t, reserved, kept, "kept under the release threshold")
	require.Equal(t, base+kept, used(t, ctx, c), "kept memory is still used")

	// The next allocation of the size reuses the kept memory.
	p2, err := c.AllocAsync(ctx, 8*n, s)
	require.NoError(t, err)
	require.NoError(t, fill(ctx, c, f, p2, -1, n, s))
	require.NoError(t, c.FreeAsync(ctx, p2, s))
	require.NoError(t, s.Synchronize(ctx))
	again, err := pool.Reserved(ctx)
	require.NoError(t, err)
	require.Equal(t, kept, again, "reused, not reserved anew")

	require.NoError(t, pool.TrimTo(ctx, 0))
	trimmed, err := pool.Reserved(ctx)
	require.NoError(t, err)
	require.Zero(t, trimmed)
	require.Equal(t, base, used(t, ctx, c), "trimmed memory is free")

	// With the threshold at 0 the pool keeps nothing once the free is
	// reached (the real driver releases it at the next synchronization).
	require.NoError(t, pool.SetReleaseThreshold(ctx, 0))
	p3, err := c.AllocAsync(ctx, 8*n, nil) // the default stream
	require.NoError(t, err)
	require.NoError(t, c.FreeAsync(ctx, p3, nil))
	require.NoError(t, c.Synchronize(ctx))
	left, err := pool.Reserved(ctx)
	require.NoError(t, err)
	require.Zero(t, left)
	require.Equal(t, base, used(t, ctx, c))

	_, err = c.AllocAsync(ctx, 0, s)
	require.ErrorIs(t, err, cuda.ErrBadArgument)
	_, err = c.AllocAsync(ctx, 32<<20, s)
	require.ErrorIs(t, err, cuda.ErrOutOfMemory, "more than the device has")
	require.ErrorIs(t, c.FreeAsync(ctx, p3, s), cuda.ErrInvalidValue, "freed already")
}

// TestOptionalEntryPoints checks that the entry points added after the
// first CUDA releases this package supports are optional, so that an
// older driver still opens, and that the methods needing them then
// return ErrNotSupported while the rest works.
func TestOptionalEntryPoints(t *testing.T) {
	newer := []string{
		"cuMemAllocAsync", "cuMemFreeAsync", "cuDeviceGetDefaultMemPool", "cuMemPoolSetAttribute",
		"cuMemPoolGetAttribute", "cuMemPoolTrimTo", "cuDeviceCanAccessPeer", "cuCtxEnablePeerAccess",
		"cuCtxDisablePeerAccess", "cuMemcpyPeerAsync", "cuLaunchHostFunc", "cuMemHostAlloc",
		"cuPointerGetAttribute",
	}
	require.Subset(t, cuda.OptionalEntryPoints(), newer)

	full, _ := fakecuda.Open(t, 2, 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), fakeTimeout)
	defer cancel()
	// A pool from the full driver, for the methods that need a MemPool.
	c, err := full.NewContext(ctx, 0)
	require.NoError(t, err)
	defer c.Close()
	pool, err := c.DefaultMemPool(ctx)
	require.NoError(t, err)

	d := cuda.WithoutEntryPoints(full)
	old, err := d.NewContext(ctx, 0)
	require.NoError(t, err)
	defer old.Close()
	peer, err := d.NewContext(ctx, 1)
	require.NoError(t, err)
	defer peer.Close()
	p, err := old.Alloc(ctx, 64)
	require.NoError(t, err, "the rest works")
	require.NoError(t, old.Free(ctx, p))

	oldPool := cuda.PoolWithContext(pool, old)
	var errs []error
	record := func(err error) { errs = append(errs, err) }
	recordV := func(_ any, err error) { record(err) }
	recordV(old.DefaultMemPool(ctx))
	recordV(old.AllocAsync(ctx, 64, nil))
	record(old.FreeAsync(ctx, p, nil))
	recordV(oldPool.ReleaseThreshold(ctx))
	record(oldPool.SetReleaseThreshold(ctx, 0))
	recordV(oldPool.Reserved(ctx))
	record(oldPool.TrimTo(ctx, 0))
	recordV(d.CanAccessPeer(0, 1))
	record(old.EnablePeerAccess(ctx, peer))
	record(old.DisablePeerAccess(ctx, peer))
	record(old.CopyPeerAsync(ctx, p, peer, p, old, 8, nil))
	recordV(old.LaunchHostFunc(ctx, func() error { return nil }, nil))
	recordV(old.AllocHostFlags(ctx, 64, cuda.HostAllocPortable))
	recordV(old.IsPinned(ctx, make([]byte, 8)))
	recordV(old.HostDevicePtr(ctx, make([]byte, 8)))
	for i, err := range errs {
		assert.ErrorIs(t, err, cuda.ErrNotSupported, "call %d", i)
	}
}
