package fakecuda_test

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
)

// CUpointer_attribute values the test asks for.
const (
	attrContext       = 1
	attrMemoryType    = 2
	attrDevicePointer = 3
	attrHostPointer   = 4
	attrP2PTokens     = 5 // not answered by the stand-in
	attrDeviceOrdinal = 9
)

// TestPointerAttributes asks cuPointerGetAttribute about device memory,
// pinned host memory and pageable memory, anywhere inside each.
func TestPointerAttributes(t *testing.T) {
	d, lib := open(t, 2, 1<<20)
	ctx, c0 := newContext(t, d, 0)
	_, c1 := newContext(t, d, 1)
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	require.NoError(t, err)
	defer func() { _ = purego.Dlclose(h) }()
	var getAttr func(data unsafe.Pointer, attr int32, ptr uintptr) int32
	var hostAlloc func(pp *unsafe.Pointer, n uintptr, flags uint32) int32
	for name, f := range map[string]any{"cuPointerGetAttribute": &getAttr, "cuMemHostAlloc": &hostAlloc} {
		sym, err := purego.Dlsym(h, name)
		require.NoError(t, err)
		purego.RegisterFunc(f, sym)
	}
	// attr asks on c's thread for a value of type T.
	attr := func(c *cuda.Context, a int32, p uintptr, v unsafe.Pointer) cuda.Result {
		var r int32
		require.NoError(t, c.Do(ctx, func() error { r = getAttr(v, a, p); return nil }))
		return cuda.Result(r)
	}

	dev, err := c1.Alloc(ctx, 1000)
	require.NoError(t, err)
	pooled, err := c1.AllocAsync(ctx, 1000, nil)
	require.NoError(t, err)
	for _, p := range []uintptr{uintptr(dev), uintptr(dev) + 999, uintptr(pooled) + 10} {
		var mt uint32
		var ord int32
		var hc uintptr
		var dp cuda.DevicePtr
		var hp unsafe.Pointer
		require.Equal(t, cuda.Success, attr(c0, attrMemoryType, p, unsafe.Pointer(&mt)), "any context may ask")
		require.EqualValues(t, memDevice, mt)
		require.Equal(t, cuda.Success, attr(c0, attrDeviceOrdinal, p, unsafe.Pointer(&ord)))
		require.EqualValues(t, 1, ord)
		require.Equal(t, cuda.Success, attr(c0, attrContext, p, unsafe.Pointer(&hc)))
		require.Equal(t, c1.Handle(), hc)
		require.Equal(t, cuda.Success, attr(c0, attrDevicePointer, p, unsafe.Pointer(&dp)))
		require.EqualValues(t, p, dp)
		require.Equal(t, cuda.ErrInvalidValue, attr(c0, attrHostPointer, p, unsafe.Pointer(&hp)))
	}

	pinned, err := c0.AllocHost(ctx, 100)
	require.NoError(t, err)
	var mapped unsafe.Pointer
	var r int32
	require.NoError(t, c0.Do(ctx, func() error { r = hostAlloc(&mapped, 100, 0x2); return nil })) // CU_MEMHOSTALLOC_DEVICEMAP
	require.Zero(t, r)
	goMem := make([]byte, 64)
	var pin runtime.Pinner
	pin.Pin(&goMem[0])
	defer pin.Unpin()
	require.NoError(t, c1.HostRegister(ctx, goMem))
	for i, tc := range []struct {
		p      uintptr
		ctx    *cuda.Context
		mapped bool
	}{
		{uintptr(unsafe.Pointer(&pinned[0])), c0, false},
		{uintptr(unsafe.Pointer(&pinned[99])), c0, false},
		{uintptr(mapped) + 50, c0, true},
		{uintptr(unsafe.Pointer(&goMem[63])), c1, false},
	} {
		var mt uint32
		var hc, hp uintptr
		var dp cuda.DevicePtr
		assert.Equal(t, cuda.Success, attr(c0, attrMemoryType, tc.p, unsafe.Pointer(&mt)), "case %d", i)
		assert.EqualValues(t, memHost, mt, "case %d", i)
		assert.Equal(t, cuda.Success, attr(c0, attrContext, tc.p, unsafe.Pointer(&hc)), "case %d", i)
		assert.Equal(t, tc.ctx.Handle(), hc, "case %d", i)
		assert.Equal(t, cuda.Success, attr(c0, attrHostPointer, tc.p, unsafe.Pointer(&hp)), "case %d", i)
		assert.Equal(t, tc.p, hp, "case %d", i)
		want := cuda.ErrInvalidValue // only cuMemHostAlloc's DEVICEMAP memory is mapped here
		if tc.mapped {
			want = cuda.Success
		}
		assert.Equal(t, want, attr(c0, attrDevicePointer, tc.p, unsafe.Pointer(&dp)), "case %d", i)
	}

	var mt uint32
	goOther := make([]byte, 64)
	require.Equal(t, cuda.ErrInvalidValue, attr(c0, attrMemoryType, uintptr(unsafe.Pointer(&goOther[0])), unsafe.Pointer(&mt)), "pageable")
	require.Equal(t, cuda.ErrInvalidValue, attr(c0, attrMemoryType, uintptr(unsafe.Pointer(&goMem[0]))+64, unsafe.Pointer(&mt)), "past the registered range")
	require.Equal(t, cuda.ErrInvalidValue, attr(c0, attrP2PTokens, uintptr(dev), unsafe.Pointer(&[4]uint64{})), "not answered")
	require.Equal(t, cuda.ErrInvalidValue, attr(c0, attrMemoryType, uintptr(dev), nil))
	runtime.KeepAlive(goOther)
	require.NoError(t, c1.HostUnregister(ctx, goMem))
	require.Equal(t, cuda.ErrInvalidValue, attr(c0, attrMemoryType, uintptr(unsafe.Pointer(&goMem[0])), unsafe.Pointer(&mt)), "unregistered")
	require.NoError(t, c0.FreeHost(ctx, unsafe.Slice((*byte)(mapped), 100)))
	require.NoError(t, c0.FreeHost(ctx, pinned))

	// Without a current context the driver refuses.
	res := make(chan int32, 1)
	go func() {
		runtime.LockOSThread() // a fresh thread, discarded afterwards
		res <- getAttr(unsafe.Pointer(&mt), attrMemoryType, uintptr(dev))
	}()
	require.EqualValues(t, cuda.ErrInvalidContext, <-res)

	var p unsafe.Pointer
	require.NoError(t, c0.Do(ctx, func() error { r = hostAlloc(&p, 64, 0x8); return nil }))
	require.EqualValues(t, cuda.ErrInvalidValue, r, "an unknown flag")
}
