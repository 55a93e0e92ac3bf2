package fakecuda_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
)

// testPTX names every built-in kernel after .entry, plus one the
// stand-in does not implement. A real driver would compile the bodies;
// the stand-in only reads the names.
const testPTX = `
.version 7.0
.target sm_52
.address_size 64

.visible .entry pz_fill_f64(.param .u64 x, .param .f64 v, .param .u64 n) { ret; }
.visible .entry pz_scale_f64(.param .u64 x, .param .f64 a, .param .u64 n) { ret; }
.visible .entry pz_axpy_f64(.param .u64 y, .param .f64 a, .param .u64 x, .param .u64 n) { ret; }
.visible .entry pz_add_f32(.param .u64 y, .param .u64 x, .param .u64 n) { ret; }
.visible .entry pz_fail() { trap; }
.visible .entry pz_wait_u32(.param .u64 flag) { ret; }
.visible .entry not_built_in() { ret; }
`

// open loads a fresh instance with devices devices of memory bytes.
func open(t *testing.T, devices int, memory int64) (*cuda.Driver, string) {
	return fakecuda.Open(t, devices, memory)
}

// newContext opens a Context on device ordinal, closed at the end of the
// test, with a context.Context that can be cancelled (so that the
// Synchronize methods poll).
func newContext(t *testing.T, d *cuda.Driver, ordinal int) (context.Context, *cuda.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	c, err := d.NewContext(ctx, ordinal)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Close()) })
	return ctx, c
}

// kernels loads testPTX and returns its functions by name.
func kernels(t *testing.T, ctx context.Context, c *cuda.Context) map[string]*cuda.Function {
	t.Helper()
	m, err := c.LoadPTX(ctx, testPTX)
	require.NoError(t, err)
	out := map[string]*cuda.Function{}
	for _, name := range []string{"pz_fill_f64", "pz_scale_f64", "pz_axpy_f64", "pz_add_f32", "pz_fail", "pz_wait_u32"} {
		out[name], err = m.Function(ctx, name)
		require.NoError(t, err, name)
	}
	return out
}

// launch runs f over n elements, 256 threads a block, on s.
func launch(ctx context.Context, c *cuda.Context, f *cuda.Function, n int, s *cuda.Stream, args ...any) error {
	grid := cuda.Dim3{X: uint32((n + 255) / 256)}
	return c.Launch(ctx, f, grid, cuda.Dim3{X: 256}, 0, s, args...)
}

func stats(t *testing.T, lib string) fakecuda.Counters {
	t.Helper()
	st, err := fakecuda.Stats(lib)
	require.NoError(t, err)
	return st
}

// seq returns {0, 1, ..., n-1} as float64.
func seq(n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(i)
	}
	return x
}

func TestBuild(t *testing.T) {
	t.Setenv(fakecuda.EnvDevices, "")
	t.Setenv(fakecuda.EnvMemory, "")
	lib := fakecuda.Build(t)
	fi, err := os.Stat(lib)
	require.NoError(t, err)
	require.Equal(t, lib, fakecuda.Build(t), "cached")
	fi2, err := os.Stat(lib)
	require.NoError(t, err)
	require.Equal(t, fi.ModTime(), fi2.ModTime(), "not rebuilt")

	// The defaults: one device of 256 MiB.
	d, err := cuda.OpenLibrary(lib)
	require.NoError(t, err)
	require.Equal(t, lib, d.Library())
	devs, err := d.Devices()
	require.NoError(t, err)
	require.Len(t, devs, 1)
	require.EqualValues(t, 256<<20, devs[0].TotalMemoryBytes)

	_, err = fakecuda.Stats(lib + ".missing")
	require.Error(t, err)
}

func TestDevices(t *testing.T) {
	d, _ := open(t, 2, 64<<20)
	require.Equal(t, 12040, d.Version())
	n, err := d.DeviceCount()
	require.NoError(t, err)
	require.Equal(t, 2, n)
	devs, err := d.Devices()
	require.NoError(t, err)
	require.Len(t, devs, 2)
	for i, dev := range devs {
		require.Equal(t, i, dev.Ordinal)
		require.Equal(t, fmt.Sprintf("pz fake GPU %d", i), dev.Name)
		require.Equal(t, fmt.Sprintf("GPU-707a6661-6b65-4000-8000-%012x", i), dev.UUID)
		require.EqualValues(t, 64<<20, dev.TotalMemoryBytes)
		require.Equal(t, 16, dev.SMCount, "EnvSMs's default")
		require.Equal(t, "9.0", dev.ComputeCapability())
		require.Equal(t, fmt.Sprintf("0000:%02x:00.0", i+1), dev.PCIBusID)
		require.Equal(t, 32, dev.WarpSize)
		require.Equal(t, 1024, dev.MaxThreadsPerBlock)
		require.Equal(t, 2048, dev.MaxThreadsPerSM)
		require.Equal(t, 49152, dev.SharedMemoryPerBlockBytes)
		require.Greater(t, dev.SharedMemoryPerBlockOptinBytes, dev.SharedMemoryPerBlockBytes)
		require.Positive(t, dev.L2CacheBytes)
		require.Positive(t, dev.MemoryBusWidthBits)
		require.Equal(t, 2, dev.AsyncEngines)
		require.False(t, dev.Integrated)
	}
	v, err := d.Attribute(0, 12345) // unknown attributes read as 0
	require.NoError(t, err)
	require.Zero(t, v)

	_, err = d.Device(2)
	require.ErrorIs(t, err, cuda.ErrInvalidDevice)
	var e *cuda.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "cuDeviceGet", e.Call)
	require.Equal(t, "CUDA_ERROR_INVALID_DEVICE", e.Name)
	require.Equal(t, "invalid device ordinal", e.Description)
	_, err = d.NewContext(context.Background(), 5)
	require.ErrorIs(t, err, cuda.ErrInvalidDevice)
}

func TestConfiguration(t *testing.T) {
	t.Run("no devices", func(t *testing.T) {
		fakecuda.Setenv(t, 0, 1<<20)
		_, err := cuda.OpenLibrary(fakecuda.Instance(t))
		require.True(t, cuda.IsNoDriver(err), "%v", err)
		require.ErrorIs(t, err, cuda.ErrNoDevice)
	})
	t.Run("malformed", func(t *testing.T) {
		fakecuda.Setenv(t, 1, 1<<20)
		t.Setenv(fakecuda.EnvMemory, "lots")
		_, err := cuda.OpenLibrary(fakecuda.Instance(t))
		require.ErrorIs(t, err, cuda.ErrInvalidValue)
		require.False(t, cuda.IsNoDriver(err), "a broken driver, not a missing one")
	})
	t.Run("before cuInit", func(t *testing.T) {
		h, err := purego.Dlopen(fakecuda.Instance(t), purego.RTLD_NOW|purego.RTLD_GLOBAL)
		require.NoError(t, err)
		defer func() { _ = purego.Dlclose(h) }()
		var count, version func(n *int32) cuda.Result
		for name, f := range map[string]any{"cuDeviceGetCount": &count, "cuDriverGetVersion": &version} {
			sym, err := purego.Dlsym(h, name)
			require.NoError(t, err)
			purego.RegisterFunc(f, sym)
		}
		var n int32
		require.Equal(t, cuda.ErrNotInitialized, count(&n))
		require.Equal(t, cuda.Success, version(&n), "as in CUDA, the version needs no cuInit")
		require.EqualValues(t, 12040, n)
	})
	t.Run("read once", func(t *testing.T) {
		d, lib := open(t, 1, 1<<20)
		t.Setenv(fakecuda.EnvDevices, "3")
		d2, err := cuda.OpenLibrary(lib) // the same instance: cuInit again
		require.NoError(t, err)
		for _, d := range []*cuda.Driver{d, d2} {
			n, err := d.DeviceCount()
			require.NoError(t, err)
			require.Equal(t, 1, n)
		}
	})
}

func TestMemory(t *testing.T) {
	const total = 1 << 20
	d, lib := open(t, 1, total)
	ctx, c := newContext(t, d, 0)

	free, tot, err := c.MemInfo(ctx)
	require.NoError(t, err)
	require.EqualValues(t, total, tot)
	require.EqualValues(t, total, free)

	p, err := c.Alloc(ctx, 4096)
	require.NoError(t, err)
	require.EqualValues(t, 0x5a5a, uint64(p)>>48, "device pointers are not host addresses")
	free, _, err = c.MemInfo(ctx)
	require.NoError(t, err)
	require.EqualValues(t, total-4096, free)

	// Fresh device memory is not zero.
	got := make([]byte, 4096)
	require.NoError(t, c.CopyDtoH(ctx, got, p))
	require.Equal(t, bytes.Repeat([]byte{0xa5}, 4096), got)

	src := make([]byte, 4096)
	for i := range src {
		src[i] = byte(i * 7)
	}
	require.NoError(t, c.CopyHtoD(ctx, p, src))
	require.NoError(t, c.Memset8(ctx, p+16, 0xee, 16))
	q, err := c.Alloc(ctx, 4096)
	require.NoError(t, err)
	require.NoError(t, c.CopyDtoD(ctx, q, p, 4096))
	require.NoError(t, c.CopyDtoH(ctx, got, q))
	want := append([]byte{}, src...)
	copy(want[16:32], bytes.Repeat([]byte{0xee}, 16))
	require.Equal(t, want, got)

	// Out of memory, and the error's text from the driver.
	_, err = c.Alloc(ctx, total)
	require.ErrorIs(t, err, cuda.ErrOutOfMemory)
	require.EqualError(t, err, "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory")

	// Ranges that are not live allocations.
	require.ErrorIs(t, c.CopyHtoD(ctx, p+4090, src[:10]), cuda.ErrInvalidValue, "past the end")
	require.ErrorIs(t, c.CopyHtoD(ctx, cuda.DevicePtr(uintptr(unsafe.Pointer(&src[0]))), src), cuda.ErrInvalidValue, "a host address")
	require.ErrorIs(t, c.Free(ctx, p+8), cuda.ErrInvalidValue, "inside an allocation")
	require.NoError(t, c.Free(ctx, p))
	require.ErrorIs(t, c.Free(ctx, p), cuda.ErrInvalidValue, "freed twice")
	require.ErrorIs(t, c.CopyDtoH(ctx, got, p), cuda.ErrInvalidValue, "freed")
	require.ErrorIs(t, c.Memset8(ctx, p, 0, 1), cuda.ErrInvalidValue, "freed")

	// The whole memory, exactly.
	require.NoError(t, c.Free(ctx, q))
	all, err := c.Alloc(ctx, total)
	require.NoError(t, err)
	_, err = c.Alloc(ctx, 1)
	require.ErrorIs(t, err, cuda.ErrOutOfMemory)

	st := stats(t, lib)
	require.Equal(t, fakecuda.Counters{LiveAllocations: 1, LiveBytes: total, HtoD: 1, DtoH: 2}, st)
	require.NoError(t, c.Free(ctx, all))
}

func TestPinnedStreams(t *testing.T) {
	const n = 10000
	fakecuda.SetDelay(t, 100*time.Microsecond)
	d, lib := open(t, 1, 1<<20)
	ctx, c := newContext(t, d, 0)
	k := kernels(t, ctx, c)

	hb, err := c.AllocHost(ctx, 8*n)
	require.NoError(t, err)
	require.Zero(t, uintptr(unsafe.Pointer(&hb[0]))%4096, "page-aligned")
	h := cuda.Slice[float64](hb)
	copy(h, seq(n))
	p, err := c.Alloc(ctx, 8*n)
	require.NoError(t, err)
	s, err := c.NewStream(ctx)
	require.NoError(t, err)

	for _, sync := range []context.Context{ctx, context.Background()} { // polling, blocking
		require.NoError(t, c.CopyHtoDAsync(ctx, p, hb, s))
		require.NoError(t, launch(ctx, c, k["pz_scale_f64"], n, s, p, 2.0, uint64(n)))
		require.NoError(t, c.CopyDtoHAsync(ctx, hb, p, s))
		require.NoError(t, s.Synchronize(sync))
	}
	for i, x := range h {
		require.Equal(t, float64(4*i), x, "element %d", i)
	}
	require.NoError(t, s.Destroy(ctx))
	require.NoError(t, c.FreeHost(ctx, hb))
	require.NoError(t, c.Free(ctx, p))
	require.ErrorIs(t, c.FreeHost(ctx, hb), cuda.ErrInvalidValue, "freed twice")
	st := stats(t, lib)
	require.Equal(t, fakecuda.Counters{HtoD: 2, DtoH: 2, Kernels: 2}, st)
}

// TestAsyncIsAsync shows what the stream delay is for: queued work is
// not done when the call returns, unless the host side is pageable
// memory, which the driver stages.
func TestAsyncIsAsync(t *testing.T) {
	const n, delay = 4096, 100 * time.Millisecond
	fakecuda.SetDelay(t, delay)
	d, _ := open(t, 1, 1<<20)
	ctx, c := newContext(t, d, 0)
	k := kernels(t, ctx, c)
	p, err := c.Alloc(ctx, n)
	require.NoError(t, err)
	s, err := c.NewStream(ctx)
	require.NoError(t, err)
	defer func() { assert.NoError(t, s.Destroy(ctx)) }()

	// Pinned memory: queued.
	pinned, err := c.AllocHost(ctx, n)
	require.NoError(t, err)
	defer func() { assert.NoError(t, c.FreeHost(ctx, pinned)) }()
	clear(pinned)
	require.NoError(t, c.Memset8(ctx, p, 0x11, n))
	e, err := c.NewEvent(ctx, true)
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, c.CopyDtoHAsync(ctx, pinned, p, s))
	require.NoError(t, e.Record(ctx, s))
	done, err := e.Done(ctx)
	require.NoError(t, err)
	if pinned[0] != 0 || done {
		// Only a stall of the test longer than the delay explains it.
		require.GreaterOrEqual(t, time.Since(start), delay, "queued work done before the stream's delay")
	}
	require.NoError(t, e.Synchronize(ctx))
	require.Equal(t, bytes.Repeat([]byte{0x11}, n), pinned)

	// Pageable memory: the copy waits for the stream (a kernel queued
	// before it), then completes before returning.
	require.NoError(t, launch(ctx, c, k["pz_fill_f64"], n/8, s, p, 1.5, uint64(n/8)))
	got := make([]float64, n/8)
	require.NoError(t, c.CopyDtoHAsync(ctx, cuda.Bytes(got), p, s))
	for i, x := range got {
		require.Equal(t, 1.5, x, "element %d", i)
	}
	// ... and the source of a staged copy may be reused at once.
	src := seq(n / 8)
	require.NoError(t, c.CopyHtoDAsync(ctx, p, cuda.Bytes(src), s))
	clear(src)
	require.NoError(t, c.CopyDtoH(ctx, cuda.Bytes(got), p))
	require.Equal(t, seq(n/8), got)
}

func TestEvents(t *testing.T) {
	const delay = 5 * time.Millisecond
	fakecuda.SetDelay(t, delay)
	d, _ := open(t, 1, 1<<20)
	ctx, c := newContext(t, d, 0)
	k := kernels(t, ctx, c)
	p, err := c.Alloc(ctx, 8*100)
	require.NoError(t, err)
	s, err := c.NewStream(ctx)
	require.NoError(t, err)

	start, err := c.NewEvent(ctx, true)
	require.NoError(t, err)
	end, err := c.NewEvent(ctx, true)
	require.NoError(t, err)
	done, err := end.Done(ctx)
	require.NoError(t, err)
	require.True(t, done, "a never-recorded event is complete")
	_, err = c.ElapsedTime(ctx, start, end)
	require.ErrorIs(t, err, cuda.ErrInvalidHandle, "never recorded")

	require.NoError(t, start.Record(ctx, s))
	require.NoError(t, launch(ctx, c, k["pz_fill_f64"], 100, s, p, 1.0, uint64(100)))
	require.NoError(t, end.Record(ctx, s))
	if _, err := c.ElapsedTime(ctx, start, end); err != nil {
		require.ErrorIs(t, err, cuda.ErrNotReady)
	}
	require.NoError(t, end.Synchronize(context.Background()))
	done, err = start.Done(ctx)
	require.NoError(t, err)
	require.True(t, done)
	el, err := c.ElapsedTime(ctx, start, end)
	require.NoError(t, err)
	require.GreaterOrEqual(t, el, 2*delay-50*time.Microsecond, "the kernel and the record each wait the delay")
	require.Less(t, el, time.Minute)

	// On the default stream an event completes at once.
	nodelay, err := c.NewEvent(ctx, false)
	require.NoError(t, err)
	require.NoError(t, nodelay.Record(ctx, nil))
	done, err = nodelay.Done(ctx)
	require.NoError(t, err)
	require.True(t, done)
	_, err = c.ElapsedTime(ctx, start, nodelay)
	require.ErrorIs(t, err, cuda.ErrInvalidHandle, "created without timing")

	for _, e := range []*cuda.Event{start, end, nodelay} {
		require.NoError(t, e.Destroy(ctx))
	}
	require.ErrorIs(t, start.Destroy(ctx), cuda.ErrInvalidHandle)
	require.NoError(t, s.Destroy(ctx))
	require.ErrorIs(t, s.Synchronize(ctx), cuda.ErrInvalidHandle, "destroyed")
	require.NoError(t, c.Synchronize(ctx))
}

func TestKernels(t *testing.T) {
	const n = 1000
	d, lib := open(t, 1, 1<<20)
	ctx, c := newContext(t, d, 0)
	k := kernels(t, ctx, c)
	s, err := c.NewStream(ctx)
	require.NoError(t, err)
	defer func() { assert.NoError(t, s.Destroy(ctx)) }()

	x, err := c.Alloc(ctx, 8*n)
	require.NoError(t, err)
	y, err := c.Alloc(ctx, 8*n)
	require.NoError(t, err)
	require.NoError(t, c.CopyHtoD(ctx, x, cuda.Bytes(seq(n))))
	for _, st := range []*cuda.Stream{s, nil} { // a stream, then the default stream
		require.NoError(t, launch(ctx, c, k["pz_fill_f64"], n, st, y, 1.0, uint64(n)))
		require.NoError(t, launch(ctx, c, k["pz_axpy_f64"], n, st, y, 0.5, x, uint64(n)))
		got := make([]float64, n)
		require.NoError(t, c.CopyDtoHAsync(ctx, cuda.Bytes(got), y, st))
		for i, v := range got {
			require.Equal(t, 1+0.5*float64(i), v, "element %d", i)
		}
	}

	// float32, with an offset into the allocation.
	f := make([]float32, 64)
	for i := range f {
		f[i] = float32(i)
	}
	require.NoError(t, c.CopyHtoD(ctx, x, cuda.Bytes(f)))
	require.NoError(t, c.CopyHtoD(ctx, y, cuda.Bytes(f)))
	require.NoError(t, launch(ctx, c, k["pz_add_f32"], 32, s, y+4*32, x, uint64(32)))
	require.NoError(t, s.Synchronize(ctx))
	got := make([]float32, 64)
	require.NoError(t, c.CopyDtoH(ctx, cuda.Bytes(got), y))
	for i, v := range got {
		want := float32(i)
		if i >= 32 {
			want += float32(i - 32)
		}
		require.Equal(t, want, v, "element %d", i)
	}

	// One element per thread: a grid too small leaves elements undone.
	require.NoError(t, c.Memset8(ctx, y, 0, 8*n))
	require.NoError(t, c.Launch(ctx, k["pz_fill_f64"], cuda.Dim3{X: 2}, cuda.Dim3{X: 64}, 0, s, y, 2.0, uint64(n)))
	require.NoError(t, s.Synchronize(ctx))
	yy := make([]float64, n)
	require.NoError(t, c.CopyDtoH(ctx, cuda.Bytes(yy), y))
	require.Equal(t, 2.0, yy[127])
	require.Equal(t, 0.0, yy[128])

	// Launch shapes the driver refuses.
	err = c.Launch(ctx, k["pz_fill_f64"], cuda.Dim3{X: 1}, cuda.Dim3{X: 2048}, 0, s, y, 2.0, uint64(n))
	require.ErrorIs(t, err, cuda.ErrInvalidValue)
	err = c.Launch(ctx, k["pz_fill_f64"], cuda.Dim3{X: 1}, cuda.Dim3{X: 1}, 1<<20, s, y, 2.0, uint64(n))
	require.ErrorIs(t, err, cuda.ErrInvalidValue)
	require.EqualValues(t, 6, stats(t, lib).Kernels)
}

func TestModules(t *testing.T) {
	d, _ := open(t, 1, 1<<20)
	ctx, c := newContext(t, d, 0)
	m, err := c.LoadPTX(ctx, testPTX)
	require.NoError(t, err)
	_, err = m.Function(ctx, "not_built_in")
	require.ErrorIs(t, err, cuda.ErrNotFound)
	require.Contains(t, err.Error(), `kernel "not_built_in"`)
	require.Contains(t, err.Error(), "named symbol not found")

	// Only the kernels the text names.
	m2, err := c.LoadPTX(ctx, ".version 7.0\n.visible .entry\tpz_add_f32(.param .u64 y) { ret; }\n")
	require.NoError(t, err)
	_, err = m2.Function(ctx, "pz_add_f32")
	require.NoError(t, err)
	_, err = m2.Function(ctx, "pz_fill_f64")
	require.ErrorIs(t, err, cuda.ErrNotFound)

	// A compile error, with its log.
	_, err = c.LoadPTX(ctx, ".version 7.0\n.target sm_52\nsyntax_error here\n")
	require.ErrorIs(t, err, cuda.ErrInvalidImage)
	var e *cuda.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "cuModuleLoadDataEx", e.Call)
	require.Equal(t, "ptxas application ptx input, line 3; error   : syntax error (fakecuda)", e.Log)
	_, err = c.LoadModule(ctx, []byte("\x7fELF\x02\x01\x01"))
	require.ErrorIs(t, err, cuda.ErrInvalidImage)

	require.NoError(t, m.Unload(ctx))
	require.ErrorIs(t, m.Unload(ctx), cuda.ErrInvalidHandle)
	_, err = m.Function(ctx, "pz_fill_f64")
	require.ErrorIs(t, err, cuda.ErrInvalidHandle, "unloaded")
	require.NoError(t, m2.Unload(ctx))
}

// TestKernelFaults: a failing kernel's error reaches the waits on its
// stream and stays; other streams go on.
func TestKernelFaults(t *testing.T) {
	d, _ := open(t, 1, 1<<20)
	ctx, c := newContext(t, d, 0)
	k := kernels(t, ctx, c)
	p, err := c.Alloc(ctx, 800)
	require.NoError(t, err)

	t.Run("launch failure", func(t *testing.T) {
		s, err := c.NewStream(ctx)
		require.NoError(t, err)
		require.NoError(t, c.Launch(ctx, k["pz_fail"], cuda.Dim3{}, cuda.Dim3{}, 0, s))
		e, err := c.NewEvent(ctx, false)
		require.NoError(t, err)
		require.NoError(t, e.Record(ctx, s))
		require.ErrorIs(t, s.Synchronize(ctx), cuda.ErrLaunchFailed)
		require.ErrorIs(t, s.Synchronize(context.Background()), cuda.ErrLaunchFailed, "sticky")
		require.ErrorIs(t, e.Synchronize(context.Background()), cuda.ErrLaunchFailed)
		_, err = e.Done(ctx)
		require.ErrorIs(t, err, cuda.ErrLaunchFailed)
		require.NoError(t, s.Destroy(ctx))
		require.NoError(t, e.Destroy(ctx))
	})
	t.Run("illegal address", func(t *testing.T) {
		s, err := c.NewStream(ctx)
		require.NoError(t, err)
		require.NoError(t, launch(ctx, c, k["pz_fill_f64"], 101, s, p, 1.0, uint64(101)), "one element too many")
		err = s.Synchronize(ctx)
		require.ErrorIs(t, err, cuda.ErrIllegalAddress)
		require.Contains(t, err.Error(), "an illegal memory access was encountered")
		require.NoError(t, s.Destroy(ctx))
	})
	t.Run("other streams go on", func(t *testing.T) {
		s, err := c.NewStream(ctx)
		require.NoError(t, err)
		require.NoError(t, launch(ctx, c, k["pz_fill_f64"], 100, s, p, 3.0, uint64(100)))
		require.NoError(t, s.Synchronize(ctx))
		require.NoError(t, s.Destroy(ctx))
	})
	t.Run("default stream", func(t *testing.T) {
		// The launch itself succeeds; the context is poisoned.
		require.NoError(t, launch(ctx, c, k["pz_scale_f64"], 1, nil, p+8*100, 1.0, uint64(1)))
		require.ErrorIs(t, c.Synchronize(ctx), cuda.ErrIllegalAddress)
		require.ErrorIs(t, c.CopyHtoD(ctx, p, make([]byte, 8)), cuda.ErrIllegalAddress, "sticky")
	})
}

// TestWaitKernel holds a stream with pz_wait_u32 until the host sets a
// word of pinned memory.
func TestWaitKernel(t *testing.T) {
	d, _ := open(t, 1, 1<<20)
	ctx, c := newContext(t, d, 0)
	k := kernels(t, ctx, c)
	flag, err := c.AllocHost(ctx, 4)
	require.NoError(t, err)
	clear(flag) // page-locked memory comes as it was left: a freed flag held 1
	t.Cleanup(func() { assert.NoError(t, c.FreeHost(ctx, flag)) })
	s, err := c.NewStream(ctx)
	require.NoError(t, err)
	defer func() { assert.NoError(t, s.Destroy(ctx)) }()
	addr := uint64(uintptr(unsafe.Pointer(&flag[0])))
	require.NoError(t, c.Launch(ctx, k["pz_wait_u32"], cuda.Dim3{X: 1}, cuda.Dim3{X: 1}, 0, s, addr))
	e, err := c.NewEvent(ctx, false)
	require.NoError(t, err)
	defer func() { assert.NoError(t, e.Destroy(ctx)) }()
	require.NoError(t, e.Record(ctx, s))
	done, err := e.Done(ctx)
	require.NoError(t, err)
	require.False(t, done, "the stream waits for the flag")
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&flag[0])), 1)
	require.NoError(t, e.Synchronize(ctx))

	require.NoError(t, c.Launch(ctx, k["pz_wait_u32"], cuda.Dim3{X: 1}, cuda.Dim3{X: 1}, 0, s, uint64(0)))
	require.ErrorIs(t, s.Synchronize(ctx), cuda.ErrIllegalAddress, "a null flag")
}

// TestThreadCheck calls the driver from a thread without a current
// context, as Go code that forgot the Context's thread would.
func TestThreadCheck(t *testing.T) {
	d, lib := open(t, 1, 1<<20)
	ctx, c := newContext(t, d, 0)
	p, err := c.Alloc(ctx, 1024)
	require.NoError(t, err)

	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	require.NoError(t, err)
	defer func() { _ = purego.Dlclose(h) }()
	var memAlloc func(p *uint64, n uintptr) int32
	sym, err := purego.Dlsym(h, "cuMemAlloc_v2")
	require.NoError(t, err)
	purego.RegisterFunc(&memAlloc, sym)

	res := make(chan int32, 1)
	go func() {
		// A fresh thread that never made a context current; it stays
		// locked, so Go discards it afterwards.
		runtime.LockOSThread()
		var q uint64
		res <- memAlloc(&q, 1024)
	}()
	require.EqualValues(t, cuda.ErrInvalidContext, <-res)
	// Through the Context, on its thread, the same call works.
	var q uint64
	require.NoError(t, c.Do(ctx, func() error {
		if r := memAlloc(&q, 1024); r != 0 {
			return cuda.Result(r)
		}
		return nil
	}))
	require.NoError(t, c.Free(ctx, cuda.DevicePtr(q)))

	st := stats(t, lib)
	require.EqualValues(t, 1, st.InvalidContext)
	require.EqualValues(t, 1, st.LiveAllocations)

	// Closing the last holder of the primary context frees what it held.
	require.NoError(t, c.Close())
	require.ErrorIs(t, c.Free(ctx, p), cuda.ErrClosed)
	require.Zero(t, stats(t, lib).LiveAllocations)
}

// TestSharedContexts: Contexts of a device share its primary context and
// its memory, which lives until the last one closes; devices do not
// share memory.
func TestSharedContexts(t *testing.T) {
	d, lib := open(t, 2, 1<<20)
	ctx, c0 := newContext(t, d, 0)
	c1, err := d.NewContext(ctx, 0)
	require.NoError(t, err)
	_, other := newContext(t, d, 1)

	p, err := c1.Alloc(ctx, 64)
	require.NoError(t, err)
	require.NoError(t, c1.CopyHtoD(ctx, p, bytes.Repeat([]byte{7}, 64)))
	got := make([]byte, 64)
	require.NoError(t, c0.CopyDtoH(ctx, got, p))
	require.Equal(t, bytes.Repeat([]byte{7}, 64), got)
	require.ErrorIs(t, other.CopyDtoH(ctx, got, p), cuda.ErrInvalidValue, "device 0's memory on device 1")

	hb, err := c1.AllocHost(ctx, 64)
	require.NoError(t, err)
	require.NoError(t, c1.Close())
	require.NoError(t, c0.CopyDtoH(ctx, got, p), "c0 still holds the primary context")
	require.NoError(t, c0.FreeHost(ctx, hb))
	require.EqualValues(t, 1, stats(t, lib).LiveAllocations)
}

// TestConcurrentUse runs goroutines on one Context, each with a stream,
// and goroutines with Contexts of their own, under the race detector.
func TestConcurrentUse(t *testing.T) {
	const workers, n = 8, 2048
	fakecuda.SetDelay(t, 50*time.Microsecond)
	d, lib := open(t, 1, 64<<20)
	ctx, shared := newContext(t, d, 0)
	k := kernels(t, ctx, shared)

	concurrently(t, d, ctx, shared, workers, func(c *cuda.Context, w int) error {
		return work(ctx, c, k, float64(w), n)
	})
	st := stats(t, lib)
	require.Zero(t, st.InvalidContext)
	require.Zero(t, st.LiveAllocations)
	require.EqualValues(t, 3*workers*4, st.Kernels)
}

// concurrently runs fn on workers goroutines at once: the even ones on
// the shared Context, the odd ones each on a Context of its own on the
// same device, and requires every one to succeed.
func concurrently(t *testing.T, d *cuda.Driver, ctx context.Context, shared *cuda.Context, workers int, fn func(c *cuda.Context, w int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			c := shared
			if w%2 == 1 {
				var err error
				if c, err = d.NewContext(ctx, 0); err != nil {
					errs <- err
					return
				}
				defer func() { _ = c.Close() }()
			}
			errs <- fn(c, w)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// work moves data through the GPU a few times on a stream of its own.
func work(ctx context.Context, c *cuda.Context, k map[string]*cuda.Function, a float64, n int) (err error) {
	s, err := c.NewStream(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.Destroy(ctx)) }()
	x, err := c.Alloc(ctx, 8*n)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.Free(ctx, x)) }()
	y, err := c.Alloc(ctx, 8*n)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.Free(ctx, y)) }()
	got := make([]float64, n)
	for round := range 4 {
		src := seq(n)
		steps := []func() error{
			func() error { return c.CopyHtoDAsync(ctx, x, cuda.Bytes(src), s) },
			func() error { return launch(ctx, c, k["pz_fill_f64"], n, s, y, a, uint64(n)) },
			func() error { return launch(ctx, c, k["pz_scale_f64"], n, s, x, float64(round), uint64(n)) },
			func() error { return launch(ctx, c, k["pz_axpy_f64"], n, s, y, 2.0, x, uint64(n)) },
			func() error { return c.CopyDtoHAsync(ctx, cuda.Bytes(got), y, s) },
		}
		for _, f := range steps {
			if err := f(); err != nil {
				return err
			}
		}
		for i, v := range got {
			if want := a + 2*float64(round*i); v != want {
				return fmt.Errorf("round %d, element %d: %v, want %v", round, i, v, want)
			}
		}
	}
	return nil
}

// memcpy2D is CUDA_MEMCPY2D; the host sides are uintptr so that the
// struct holds no Go pointers.
type memcpy2D struct {
	srcXInBytes, srcY uintptr
	srcMemoryType     int32
	srcHost           uintptr
	srcDevice         cuda.DevicePtr
	srcArray          uintptr
	srcPitch          uintptr
	dstXInBytes, dstY uintptr
	dstMemoryType     int32
	dstHost           uintptr
	dstDevice         cuda.DevicePtr
	dstArray          uintptr
	dstPitch          uintptr
	width, height     uintptr
}

// CUresults hardware/cuda does not name.
const (
	errAlreadyRegistered cuda.Result = 712 // CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
	errNotRegistered     cuda.Result = 713 // CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
)

// CUmemorytype
const (
	memHost    = 1
	memDevice  = 2
	memArray   = 3
	memUnified = 4
)

// raw binds, from the instance at lib, the entry points the test calls
// directly.
type raw struct {
	memcpy2D          func(p *memcpy2D) int32
	memcpy2DAsync     func(p *memcpy2D, s uintptr) int32
	memcpyDtoDAsync   func(dst, src cuda.DevicePtr, n, s uintptr) int32
	memcpyHtoDAsync   func(dst cuda.DevicePtr, src unsafe.Pointer, n, s uintptr) int32
	memsetD8Async     func(dst cuda.DevicePtr, v uint8, n, s uintptr) int32
	memHostRegister   func(p unsafe.Pointer, n uintptr, flags uint32) int32
	memHostUnregister func(p unsafe.Pointer) int32
	streamCreate      func(s *uintptr, flags uint32) int32
	streamSynchronize func(s uintptr) int32
	streamQuery       func(s uintptr) int32
	streamDestroy     func(s uintptr) int32
	streamWaitEvent   func(s, e uintptr, flags uint32) int32
	eventCreate       func(e *uintptr, flags uint32) int32
	eventRecord       func(e, s uintptr) int32
	eventDestroy      func(e uintptr) int32
}

func bindRaw(t *testing.T, lib string) *raw {
	t.Helper()
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = purego.Dlclose(h) })
	r := &raw{}
	for name, fptr := range map[string]any{
		"cuMemcpy2D_v2":        &r.memcpy2D,
		"cuMemcpy2DAsync_v2":   &r.memcpy2DAsync,
		"cuMemcpyDtoDAsync_v2": &r.memcpyDtoDAsync,
		"cuMemcpyHtoDAsync_v2": &r.memcpyHtoDAsync,
		"cuMemsetD8Async":      &r.memsetD8Async,
		"cuMemHostRegister_v2": &r.memHostRegister,
		"cuMemHostUnregister":  &r.memHostUnregister,
		"cuStreamCreate":       &r.streamCreate,
		"cuStreamSynchronize":  &r.streamSynchronize,
		"cuStreamQuery":        &r.streamQuery,
		"cuStreamDestroy_v2":   &r.streamDestroy,
		"cuStreamWaitEvent":    &r.streamWaitEvent,
		"cuEventCreate":        &r.eventCreate,
		"cuEventRecord":        &r.eventRecord,
		"cuEventDestroy_v2":    &r.eventDestroy,
	} {
		sym, err := purego.Dlsym(h, name)
		require.NoError(t, err, name)
		purego.RegisterFunc(fptr, sym)
	}
	return r
}

// expect turns a CUresult into an error unless it is want.
func expect(what string, got int32, want cuda.Result) error {
	if cuda.Result(got) != want {
		return fmt.Errorf("%s: %s, want %s", what, cuda.Result(got).Name(), want.Name())
	}
	return nil
}

// TestCopy2D exercises cuMemcpy2D_v2 and cuMemcpy2DAsync_v2: a 3x4 tile
// of a host matrix with rows 6 bytes apart, dense on the device, then
// back into another matrix at an offset.
func TestCopy2D(t *testing.T) {
	fakecuda.SetDelay(t, time.Millisecond)
	d, lib := open(t, 1, 1<<20)
	ctx, c := newContext(t, d, 0)
	r := bindRaw(t, lib)
	p, err := c.Alloc(ctx, 64)
	require.NoError(t, err)
	host := []byte("abcdefghijklmnopqrstuvwx")
	out := bytes.Repeat([]byte{'.'}, 40)
	var pin runtime.Pinner
	pin.Pin(&host[0])
	pin.Pin(&out[0])
	defer pin.Unpin()

	in := memcpy2D{
		srcXInBytes: 1, srcY: 1, srcMemoryType: memHost, srcHost: uintptr(unsafe.Pointer(&host[0])), srcPitch: 6,
		dstMemoryType: memDevice, dstDevice: p, dstPitch: 4,
		width: 4, height: 3,
	}
	back := memcpy2D{
		srcMemoryType: memUnified, srcDevice: p, srcPitch: 4,
		dstXInBytes: 2, dstY: 1, dstMemoryType: memHost, dstHost: uintptr(unsafe.Pointer(&out[0])), dstPitch: 8,
		width: 4, height: 3,
	}
	require.EqualValues(t, 128, unsafe.Sizeof(in))
	require.NoError(t, c.Do(ctx, func() error {
		return errors.Join(expect("HtoD", r.memcpy2D(&in), cuda.Success), expect("DtoH", r.memcpy2D(&back), cuda.Success))
	}))
	require.Equal(t, "..........hijk....nopq....tuvw..........", string(out))
	dense := make([]byte, 12)
	require.NoError(t, c.CopyDtoH(ctx, dense, p))
	require.Equal(t, "hijknopqtuvw", string(dense))

	// Shapes the driver refuses.
	bad := func(f func(*memcpy2D)) *memcpy2D {
		b := in
		f(&b)
		return &b
	}
	require.NoError(t, c.Do(ctx, func() error {
		return errors.Join(
			expect("pitch below width", r.memcpy2D(bad(func(b *memcpy2D) { b.dstPitch = 3 })), cuda.ErrInvalidValue),
			expect("array", r.memcpy2D(bad(func(b *memcpy2D) { b.dstMemoryType = memArray })), cuda.ErrInvalidValue),
			expect("past the allocation", r.memcpy2D(bad(func(b *memcpy2D) { b.dstY = 14 })), cuda.ErrInvalidValue),
			expect("empty", r.memcpy2D(bad(func(b *memcpy2D) { b.height = 0 })), cuda.Success),
		)
	}))

	// Asynchronous, from pinned memory: queued with a copy of the
	// description, which the caller may reuse at once.
	hb, err := c.AllocHost(ctx, 24)
	require.NoError(t, err)
	copy(hb, "ABCDEFGHIJKLMNOPQRSTUVWX")
	var s uintptr
	require.NoError(t, c.Do(ctx, func() error {
		if err := expect("create", r.streamCreate(&s, 1), cuda.Success); err != nil {
			return err
		}
		a := in
		a.srcHost = uintptr(unsafe.Pointer(&hb[0]))
		queued := expect("async", r.memcpy2DAsync(&a, s), cuda.Success)
		a = memcpy2D{} // the stream has its own copy
		return errors.Join(queued, expect("sync", r.streamSynchronize(s), cuda.Success),
			expect("destroy", r.streamDestroy(s), cuda.Success))
	}))
	require.NoError(t, c.CopyDtoH(ctx, dense, p))
	require.Equal(t, "HIJKNOPQTUVW", string(dense))
	require.NoError(t, c.FreeHost(ctx, hb))
	st := stats(t, lib)
	require.EqualValues(t, 2, st.HtoD)
	require.EqualValues(t, 3, st.DtoH)
}

// TestStreamsRaw exercises the asynchronous entry points hardware/cuda
// did not bind when this test was written: DtoD and memset on a stream,
// registered host memory, and one stream waiting for another's event.
func TestStreamsRaw(t *testing.T) {
	const n = 1 << 16
	fakecuda.SetDelay(t, 2*time.Millisecond)
	d, lib := open(t, 1, 1<<20)
	ctx, c := newContext(t, d, 0)
	r := bindRaw(t, lib)
	p, err := c.Alloc(ctx, n)
	require.NoError(t, err)
	q, err := c.Alloc(ctx, n)
	require.NoError(t, err)
	buf := make([]byte, 2*n) // Go memory, registered below
	var pin runtime.Pinner
	pin.Pin(&buf[0])
	defer pin.Unpin()
	reg := unsafe.Pointer(&buf[0])

	var a, b, e uintptr
	require.NoError(t, c.Do(ctx, func() error {
		return errors.Join(
			expect("stream a", r.streamCreate(&a, 1), cuda.Success),
			expect("stream b", r.streamCreate(&b, 0), cuda.Success),
			expect("event", r.eventCreate(&e, 2), cuda.Success),
			expect("bad flags", r.streamCreate(new(uintptr), 8), cuda.ErrInvalidValue),
			expect("register", r.memHostRegister(reg, 2*n, 0), cuda.Success),
			expect("register again", r.memHostRegister(unsafe.Add(reg, n), 16, 0), errAlreadyRegistered),
			expect("wait for a never-recorded event", r.streamWaitEvent(b, e, 0), cuda.Success),
		)
	}))

	// a: memset p, record e. b: wait for e, copy p to q, then q into the
	// registered buffer (queued: it is pinned).
	require.NoError(t, c.Do(ctx, func() error {
		return errors.Join(
			expect("memset", r.memsetD8Async(p, 0x42, n, a), cuda.Success),
			expect("record", r.eventRecord(e, a), cuda.Success),
			expect("wait", r.streamWaitEvent(b, e, 0), cuda.Success),
			expect("DtoD", r.memcpyDtoDAsync(q, p, n, b), cuda.Success),
			expect("memset past the end", r.memsetD8Async(q+1, 0, n, b), cuda.ErrInvalidValue),
		)
	}))
	require.NoError(t, c.CopyDtoHAsync(ctx, buf[:n], q, nil)) // the default stream waits for b, a blocking stream
	require.Equal(t, bytes.Repeat([]byte{0x42}, n), buf[:n])

	// Pinned (registered) source: queued, so the buffer must be left
	// alone until the stream is done.
	clear(buf)
	require.NoError(t, c.Do(ctx, func() error {
		return errors.Join(
			expect("HtoD", r.memcpyHtoDAsync(p, reg, n, a), cuda.Success),
			expect("sync", r.streamSynchronize(a), cuda.Success),
			expect("query", r.streamQuery(a), cuda.Success),
		)
	}))
	got := make([]byte, n)
	require.NoError(t, c.CopyDtoH(ctx, got, p))
	require.Equal(t, make([]byte, n), got)

	require.NoError(t, c.Do(ctx, func() error {
		return errors.Join(
			expect("unregister", r.memHostUnregister(reg), cuda.Success),
			expect("unregister again", r.memHostUnregister(reg), errNotRegistered),
			expect("destroy a", r.streamDestroy(a), cuda.Success),
			expect("destroy b", r.streamDestroy(b), cuda.Success),
			expect("destroy a again", r.streamDestroy(a), cuda.ErrInvalidHandle),
			expect("event", r.eventDestroy(e), cuda.Success),
		)
	}))
	require.Zero(t, stats(t, lib).InvalidContext)
}

// TestErrorStrings checks the driver's error names against
// hardware/cuda's table, and an error as hardware/cuda reports it.
func TestErrorStrings(t *testing.T) {
	d, lib := open(t, 1, 1<<20)
	ctx, c := newContext(t, d, 0)
	_, err := c.Alloc(ctx, 2<<20)
	var e *cuda.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, cuda.Error{Call: "cuMemAlloc_v2", Code: cuda.ErrOutOfMemory, Name: "CUDA_ERROR_OUT_OF_MEMORY", Description: "out of memory"}, *e)

	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	require.NoError(t, err)
	defer func() { _ = purego.Dlclose(h) }()
	var getName, getString func(r cuda.Result, p **byte) cuda.Result
	for name, f := range map[string]any{"cuGetErrorName": &getName, "cuGetErrorString": &getString} {
		sym, err := purego.Dlsym(h, name)
		require.NoError(t, err)
		purego.RegisterFunc(f, sym)
	}
	str := func(p *byte) string {
		var b []byte
		for ; *p != 0; p = (*byte)(unsafe.Add(unsafe.Pointer(p), 1)) {
			b = append(b, *p)
		}
		return string(b)
	}
	for _, r := range []cuda.Result{cuda.Success, cuda.ErrInvalidValue, cuda.ErrOutOfMemory, cuda.ErrNotInitialized,
		cuda.ErrNoDevice, cuda.ErrInvalidDevice, cuda.ErrInvalidImage, cuda.ErrInvalidContext, cuda.ErrInvalidHandle,
		cuda.ErrNotFound, cuda.ErrNotReady, cuda.ErrIllegalAddress, cuda.ErrLaunchFailed, cuda.ErrUnknown} {
		var name, desc *byte
		require.Equal(t, cuda.Success, getName(r, &name), r.Name())
		require.Equal(t, cuda.Success, getString(r, &desc), r.Name())
		require.Equal(t, r.Name(), str(name))
		require.NotEmpty(t, str(desc))
	}
	var p *byte
	require.Equal(t, cuda.ErrInvalidValue, getName(12345, &p))
	require.Nil(t, p)
}
