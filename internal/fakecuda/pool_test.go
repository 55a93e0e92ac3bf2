package fakecuda_test

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
)

// holder holds streams with pz_wait_u32 kernels until the test releases
// them: each flag is a word of pinned host memory.
type holder struct {
	words []uint32
}

func newHolder(t *testing.T, ctx context.Context, c *cuda.Context, n int) *holder {
	t.Helper()
	b, err := c.AllocHost(ctx, 4*n)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.FreeHost(ctx, b)) })
	h := &holder{words: cuda.Slice[uint32](b)}
	clear(h.words) // pinned memory comes uninitialized
	// Cleanups run last first: a failed test releases its streams before
	// FreeHost and Close wait for them.
	t.Cleanup(func() {
		for i := range h.words {
			h.release(i)
		}
	})
	return h
}

// hold makes s wait until release(i).
func (h *holder) hold(t *testing.T, ctx context.Context, c *cuda.Context, k map[string]*cuda.Function, s *cuda.Stream, i int) {
	t.Helper()
	addr := uint64(uintptr(unsafe.Pointer(&h.words[i])))
	require.NoError(t, c.Launch(ctx, k["pz_wait_u32"], cuda.Dim3{X: 1}, cuda.Dim3{X: 1}, 0, s, addr))
}

func (h *holder) release(i int) { atomic.StoreUint32(&h.words[i], 1) }

// newStream creates a stream of c, destroyed at the end of the test.
func newStream(t *testing.T, ctx context.Context, c *cuda.Context) *cuda.Stream {
	t.Helper()
	s, err := c.NewStream(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Destroy(ctx)) })
	return s
}

// TestAllocAsyncOrder shows that a stream-ordered allocation exists for
// kernels from its point of the stream on, and until its free's: with
// the allocating stream held, a kernel on another stream that does not
// wait for it faults; one queued after the allocation was reached works,
// until the free is reached.
func TestAllocAsyncOrder(t *testing.T) {
	d, lib := open(t, 1, 1<<20)
	ctx, c := newContext(t, d, 0)
	k := kernels(t, ctx, c)
	h := newHolder(t, ctx, c, 2)
	s1 := newStream(t, ctx, c)
	const n = 256
	fill := func(p cuda.DevicePtr, s *cuda.Stream) error {
		if err := launch(ctx, c, k["pz_fill_f64"], n, s, p, 3.0, uint64(n)); err != nil {
			return err
		}
		return s.Synchronize(ctx)
	}

	h.hold(t, ctx, c, k, s1, 0)
	p, err := c.AllocAsync(ctx, 8*n, s1)
	require.NoError(t, err)
	require.EqualValues(t, 1, stats(t, lib).LiveAllocations)
	require.ErrorIs(t, fill(p, newStream(t, ctx, c)), cuda.ErrIllegalAddress, "before the allocation")
	h.release(0)
	require.NoError(t, s1.Synchronize(ctx))
	require.NoError(t, fill(p, newStream(t, ctx, c)), "after the allocation")
	out := make([]float64, n)
	require.NoError(t, c.CopyDtoH(ctx, cuda.Bytes(out), p))
	require.Equal(t, 3.0, out[n-1])

	h.hold(t, ctx, c, k, s1, 1)
	require.NoError(t, c.FreeAsync(ctx, p, s1))
	require.ErrorIs(t, c.FreeAsync(ctx, p, s1), cuda.ErrInvalidValue, "freed twice")
	require.NoError(t, fill(p, newStream(t, ctx, c)), "before the free")
	h.release(1)
	require.NoError(t, s1.Synchronize(ctx))
	require.ErrorIs(t, fill(p, newStream(t, ctx, c)), cuda.ErrIllegalAddress, "after the free")
	require.Zero(t, stats(t, lib).LiveAllocations)

	// FreeAsync also frees memory from Alloc, at its point of the stream.
	q, err := c.Alloc(ctx, 64)
	require.NoError(t, err)
	require.NoError(t, c.FreeAsync(ctx, q, s1))
	require.NoError(t, s1.Synchronize(ctx))
	require.ErrorIs(t, c.Free(ctx, q), cuda.ErrInvalidValue, "freed already")
	free, total, err := c.MemInfo(ctx)
	require.NoError(t, err)
	require.Equal(t, total, free)
}

// TestPoolMemory checks the pool's accounting: what it keeps counts
// against the device, it releases what it keeps when a new block would
// not fit, and the last release of the primary context empties it.
func TestPoolMemory(t *testing.T) {
	fakecuda.SetDelay(t, 0)
	d, _ := open(t, 1, 1<<20)
	ctx, c := newContext(t, d, 0)
	pool, err := c.DefaultMemPool(ctx)
	require.NoError(t, err)
	require.NoError(t, pool.SetReleaseThreshold(ctx, math.MaxUint64))
	usedMem := func() uint64 {
		free, total, err := c.MemInfo(ctx)
		require.NoError(t, err)
		return total - free
	}
	reserved := func() uint64 {
		r, err := pool.Reserved(ctx)
		require.NoError(t, err)
		return r
	}

	p, err := c.AllocAsync(ctx, 512<<10, nil)
	require.NoError(t, err)
	require.NoError(t, c.FreeAsync(ctx, p, nil))
	require.EqualValues(t, 512<<10, reserved(), "kept")
	require.EqualValues(t, 512<<10, usedMem())
	_, err = c.Alloc(ctx, 768<<10)
	require.ErrorIs(t, err, cuda.ErrOutOfMemory, "the kept memory is not free")
	// A pool allocation that the kept block cannot serve, and that does
	// not fit beside it, makes the pool release it.
	p, err = c.AllocAsync(ctx, 768<<10, nil)
	require.NoError(t, err)
	require.EqualValues(t, 768<<10, reserved())
	require.EqualValues(t, 768<<10, usedMem())
	_, err = c.AllocAsync(ctx, 512<<10, nil)
	require.ErrorIs(t, err, cuda.ErrOutOfMemory)

	// Trimming keeps outstanding allocations, and at least what it is told.
	q, err := c.AllocAsync(ctx, 1024, nil)
	require.NoError(t, err)
	require.NoError(t, c.FreeAsync(ctx, q, nil))
	require.EqualValues(t, 768<<10+1024, reserved())
	require.NoError(t, pool.TrimTo(ctx, 768<<10+1))
	require.EqualValues(t, 768<<10+1024, reserved(), "trimming the cached block would go below the minimum")
	require.NoError(t, pool.TrimTo(ctx, 0))
	require.EqualValues(t, 768<<10, reserved(), "the outstanding allocation stays")

	// Lowering the threshold releases what is above it.
	require.NoError(t, c.FreeAsync(ctx, p, nil))
	require.EqualValues(t, 768<<10, reserved())
	require.NoError(t, pool.SetReleaseThreshold(ctx, 0))
	require.Zero(t, reserved())
	require.Zero(t, usedMem())

	// The last release of the primary context frees the pool's memory and
	// resets the pool.
	require.NoError(t, pool.SetReleaseThreshold(ctx, 1<<20))
	_, err = c.AllocAsync(ctx, 4096, nil)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	ctx, c = newContext(t, d, 0)
	pool, err = c.DefaultMemPool(ctx)
	require.NoError(t, err)
	require.Zero(t, reserved())
	th, err := pool.ReleaseThreshold(ctx)
	require.NoError(t, err)
	require.Zero(t, th)
	require.Zero(t, usedMem())
}

// TestPoolAttributes exercises the attributes MemPool does not wrap,
// through the raw entry points and the pool's handle.
func TestPoolAttributes(t *testing.T) {
	d, lib := open(t, 1, 1<<20)
	ctx, c := newContext(t, d, 0)
	pool, err := c.DefaultMemPool(ctx)
	require.NoError(t, err)
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	require.NoError(t, err)
	defer func() { _ = purego.Dlclose(h) }()
	var get, set func(pool uintptr, attr int32, v unsafe.Pointer) int32
	var defaultPool func(pool *uintptr, dev int32) int32
	for name, f := range map[string]any{"cuMemPoolGetAttribute": &get, "cuMemPoolSetAttribute": &set, "cuDeviceGetDefaultMemPool": &defaultPool} {
		sym, err := purego.Dlsym(h, name)
		require.NoError(t, err)
		purego.RegisterFunc(f, sym)
	}
	var ph uintptr
	require.Zero(t, defaultPool(&ph, 0))
	require.Equal(t, pool.Handle(), ph)
	require.EqualValues(t, cuda.ErrInvalidDevice, defaultPool(&ph, 1))

	const (
		followEvents = 1 // CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, an int
		reservedNow  = 5 // CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT
		reservedHigh = 6 // CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH
		usedHigh     = 8 // CU_MEMPOOL_ATTR_USED_MEM_HIGH
	)
	var i int32
	require.Zero(t, get(ph, followEvents, unsafe.Pointer(&i)))
	require.EqualValues(t, 1, i, "enabled by default")
	i = 0
	require.Zero(t, set(ph, followEvents, unsafe.Pointer(&i)))
	i = 7
	require.Zero(t, get(ph, followEvents, unsafe.Pointer(&i)))
	require.Zero(t, i)

	p, err := c.AllocAsync(ctx, 4096, nil)
	require.NoError(t, err)
	require.NoError(t, c.FreeAsync(ctx, p, nil)) // threshold 0: released
	var v uint64
	require.Zero(t, get(ph, reservedHigh, unsafe.Pointer(&v)))
	require.EqualValues(t, 4096, v, "the high watermark stays")
	require.Zero(t, get(ph, usedHigh, unsafe.Pointer(&v)))
	require.EqualValues(t, 4096, v)
	v = 1
	require.EqualValues(t, cuda.ErrInvalidValue, set(ph, reservedHigh, unsafe.Pointer(&v)), "only 0 resets")
	require.EqualValues(t, cuda.ErrInvalidValue, set(ph, reservedNow, unsafe.Pointer(&v)), "read-only")
	v = 0
	require.Zero(t, set(ph, reservedHigh, unsafe.Pointer(&v)))
	v = 1
	require.Zero(t, get(ph, reservedHigh, unsafe.Pointer(&v)))
	require.Zero(t, v, "reset to the current amount")
	require.EqualValues(t, cuda.ErrInvalidValue, get(ph, 99, unsafe.Pointer(&v)), "no such attribute")
	require.EqualValues(t, cuda.ErrInvalidValue, get(ph, reservedNow, nil))
	require.EqualValues(t, cuda.ErrInvalidValue, get(ph+8, reservedNow, unsafe.Pointer(&v)), "not a pool")
}
