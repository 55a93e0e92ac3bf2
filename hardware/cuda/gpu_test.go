package cuda_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
)

// These tests need an NVIDIA driver and a GPU; elsewhere they skip and
// say why.

const gpuTimeout = 2 * time.Minute

// openDriver returns the driver or skips the test.
func openDriver(tb testing.TB) *cuda.Driver {
	tb.Helper()
	d, err := cuda.Open()
	if errors.Is(err, cuda.ErrNoDriver) {
		tb.Skipf("no CUDA driver on this machine, GPU test skipped: %v", err)
	}
	require.NoError(tb, err)
	n, err := d.DeviceCount()
	require.NoError(tb, err)
	if n == 0 {
		tb.Skip("CUDA driver present but no device visible, GPU test skipped")
	}
	return d
}

// openContext returns a Context on device 0, closed at the end of the
// test, or skips the test.
func openContext(tb testing.TB) (context.Context, *cuda.Context) {
	tb.Helper()
	d := openDriver(tb)
	ctx, cancel := context.WithTimeout(context.Background(), gpuTimeout)
	tb.Cleanup(cancel)
	c, err := d.NewContext(ctx, 0)
	require.NoError(tb, err)
	tb.Cleanup(func() { assert.NoError(tb, c.Close()) })
	return ctx, c
}

// smiRow is one line of nvidia-smi --query-gpu output.
type smiRow struct {
	name, uuid string
	memMiB     uint64
	domain     uint64
	bus, dev   uint64
}

func nvidiaSMI(t *testing.T) []smiRow {
	t.Helper()
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		t.Skipf("nvidia-smi not installed, cross-check skipped: %v", err)
	}
	out, err := exec.Command(path, "--query-gpu=name,memory.total,pci.bus_id,uuid", "--format=csv,noheader,nounits").Output()
	require.NoError(t, err)
	var rows []smiRow
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, ",")
		require.Len(t, f, 4, "%q", line)
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		r := smiRow{name: f[0], uuid: f[3]}
		r.memMiB, err = strconv.ParseUint(f[1], 10, 64)
		require.NoError(t, err)
		// "00000000:01:00.0": domain:bus:device.function in hex.
		var fn uint64
		_, err = fmt.Sscanf(f[2], "%x:%x:%x.%x", &r.domain, &r.bus, &r.dev, &fn)
		require.NoError(t, err, "%q", f[2])
		rows = append(rows, r)
	}
	return rows
}

func TestDevicesMatchNvidiaSMI(t *testing.T) {
	d := openDriver(t)
	devs, err := d.Devices()
	require.NoError(t, err)
	rows := nvidiaSMI(t)
	require.NotEmpty(t, devs)
	assert.GreaterOrEqual(t, len(rows), len(devs), "CUDA_VISIBLE_DEVICES can only hide devices")
	for i, dev := range devs {
		t.Logf("device %d: %+v", i, dev)
		assert.Equal(t, i, dev.Ordinal)
		assert.Positive(t, dev.SMCount)
		assert.GreaterOrEqual(t, dev.ComputeMajor, 5)
		assert.Equal(t, 32, dev.WarpSize)
		var match *smiRow
		for j := range rows {
			if rows[j].domain == uint64(dev.PCIDomain) && rows[j].bus == uint64(dev.PCIBus) && rows[j].dev == uint64(dev.PCIDevice) {
				match = &rows[j]
			}
		}
		require.NotNil(t, match, "device %d at %s not listed by nvidia-smi", i, dev.PCIBusID)
		assert.Equal(t, match.name, dev.Name, "device %d", i)
		assert.Equal(t, match.uuid, dev.UUID, "device %d", i)
		// nvidia-smi rounds to MiB; allow 1% for drivers that hide a
		// reserved region from one of the two.
		assert.InEpsilon(t, float64(match.memMiB), float64(dev.TotalMemoryBytes>>20), 0.01, "device %d", i)
	}
}

func TestMemInfoAndAlloc(t *testing.T) {
	ctx, c := openContext(t)
	info, err := c.Driver().Device(0)
	require.NoError(t, err)
	free0, total, err := c.MemInfo(ctx)
	require.NoError(t, err)
	assert.Equal(t, info.TotalMemoryBytes, total)
	assert.LessOrEqual(t, free0, total)

	const n = 256 << 20
	p, err := c.Alloc(ctx, n)
	require.NoError(t, err)
	assert.NotZero(t, p)
	free1, _, err := c.MemInfo(ctx)
	require.NoError(t, err)
	// Other processes may allocate meanwhile; ours alone takes >= 256 MiB.
	assert.GreaterOrEqual(t, int64(free0)-int64(free1), int64(n)-(16<<20))
	require.NoError(t, c.Free(ctx, p))

	_, err = c.Alloc(ctx, 0)
	require.ErrorIs(t, err, cuda.ErrBadArgument)
	_, err = c.Alloc(ctx, 1<<62)
	require.ErrorIs(t, err, cuda.ErrOutOfMemory)
}

// hostInputs returns n seeded random float32 values in [-1, 1).
func hostInputs(seed uint64, n int) []float32 {
	rng := rand.New(rand.NewPCG(seed, 99))
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.Float64()*2 - 1)
	}
	return v
}

func TestVectorAddPTX(t *testing.T) {
	ctx, c := openContext(t)
	mod, err := c.LoadPTX(ctx, testPTX)
	require.NoError(t, err)
	defer func() { assert.NoError(t, mod.Unload(ctx)) }()
	vadd, err := mod.Function(ctx, "vadd")
	require.NoError(t, err)
	saxpy, err := mod.Function(ctx, "saxpy")
	require.NoError(t, err)

	const n = 1<<20 + 3 // not a multiple of the block size: tests the bound check
	const bytes = 4 * n
	a, b := hostInputs(1, n), hostInputs(2, n)

	// Pinned staging buffers and a non-blocking stream.
	hostA, err := c.AllocHost(ctx, bytes)
	require.NoError(t, err)
	defer func() { assert.NoError(t, c.FreeHost(ctx, hostA)) }()
	hostC, err := c.AllocHost(ctx, bytes)
	require.NoError(t, err)
	defer func() { assert.NoError(t, c.FreeHost(ctx, hostC)) }()
	copy(cuda.Slice[float32](hostA), a)

	var dev [3]cuda.DevicePtr
	for i := range dev {
		dev[i], err = c.Alloc(ctx, bytes)
		require.NoError(t, err)
		defer func() { assert.NoError(t, c.Free(ctx, dev[i])) }()
	}
	s, err := c.NewStream(ctx)
	require.NoError(t, err)
	defer func() { assert.NoError(t, s.Destroy(ctx)) }()
	start, err := c.NewEvent(ctx, true)
	require.NoError(t, err)
	defer func() { assert.NoError(t, start.Destroy(ctx)) }()
	end, err := c.NewEvent(ctx, true)
	require.NoError(t, err)
	defer func() { assert.NoError(t, end.Destroy(ctx)) }()

	require.NoError(t, c.CopyHtoDAsync(ctx, dev[0], hostA, s))
	// Pageable Go memory, on the legacy default stream.
	require.NoError(t, c.CopyHtoD(ctx, dev[1], cuda.Bytes(b)))
	// NaNs: the kernel must overwrite every element.
	require.NoError(t, c.Memset8(ctx, dev[2], 0xff, bytes))
	// A pageable copy may return before its DMA ends and a memset is
	// asynchronous, both on the default stream, with which the
	// non-blocking stream s does not synchronize: wait for them.
	require.NoError(t, c.Synchronize(ctx))
	block := cuda.Dim3{X: 256}
	grid := cuda.Dim3{X: (n + 255) / 256}
	require.NoError(t, start.Record(ctx, s))
	require.NoError(t, c.Launch(ctx, vadd, grid, block, 0, s, dev[0], dev[1], dev[2], uint32(n)))
	require.NoError(t, end.Record(ctx, s))
	require.NoError(t, c.CopyDtoHAsync(ctx, hostC, dev[2], s))
	require.NoError(t, s.Synchronize(ctx))
	elapsed, err := c.ElapsedTime(ctx, start, end)
	require.NoError(t, err)
	t.Logf("vadd of %d floats: %v on the device", n, elapsed)
	assert.Positive(t, elapsed)

	got := cuda.Slice[float32](hostC)
	for i := range n {
		if want := a[i] + b[i]; got[i] != want {
			t.Fatalf("c[%d] = %v, want %v (a %v + b %v)", i, got[i], want, a[i], b[i])
		}
	}

	// saxpy in place on dev[1] (y = b): float32 and int32 arguments.
	const alpha = float32(2.5)
	require.NoError(t, c.Launch(ctx, saxpy, grid, block, 0, s, alpha, dev[0], dev[1], int32(n)))
	require.NoError(t, s.Synchronize(context.Background())) // the blocking path
	y := make([]float32, n)
	require.NoError(t, c.CopyDtoH(ctx, cuda.Bytes(y), dev[1]))
	for i := range n {
		want := float32(math.FMA(float64(alpha), float64(a[i]), float64(b[i])))
		if math.Abs(float64(y[i]-want)) > 1e-6*math.Max(1, math.Abs(float64(want))) {
			t.Fatalf("y[%d] = %v, want %v", i, y[i], want)
		}
	}
}

func TestLoadBadPTXReturnsLog(t *testing.T) {
	ctx, c := openContext(t)
	bad := ".version 7.0\n.target sm_52\n.address_size 64\n.visible .entry broken() { this is not ptx; }\n"
	_, err := c.LoadPTX(ctx, bad)
	require.Error(t, err)
	var ce *cuda.Error
	require.ErrorAs(t, err, &ce)
	t.Logf("%v", err)
	assert.ErrorIs(t, err, cuda.ErrInvalidPTX)
	assert.NotEmpty(t, ce.Log, "the JIT error log is captured")

	mod, err := c.LoadPTX(ctx, testPTX)
	require.NoError(t, err)
	_, err = mod.Function(ctx, "no_such_kernel")
	require.ErrorIs(t, err, cuda.ErrNotFound)
	require.NoError(t, mod.Unload(ctx))
}

func TestSynchronizeHonoursContext(t *testing.T) {
	ctx, c := openContext(t)
	mod, err := c.LoadPTX(ctx, testPTX)
	require.NoError(t, err)
	spin, err := mod.Function(ctx, "spin")
	require.NoError(t, err)
	s, err := c.NewStream(ctx)
	require.NoError(t, err)
	done, err := c.NewEvent(ctx, false)
	require.NoError(t, err)

	// About 0.3 s at the H100's 1.7 GHz; at least 50 ms on any GPU.
	require.NoError(t, c.Launch(ctx, spin, cuda.Dim3{X: 1}, cuda.Dim3{X: 1}, 0, s, uint64(500_000_000)))
	require.NoError(t, done.Record(ctx, s))
	finished, err := done.Done(ctx)
	require.NoError(t, err)
	assert.False(t, finished, "the kernel is still spinning")

	short, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, s.Synchronize(short), context.DeadlineExceeded)
	// The context's thread stays free while a stream is polled.
	_, _, err = c.MemInfo(ctx)
	require.NoError(t, err)
	require.NoError(t, done.Synchronize(ctx))
	finished, err = done.Done(ctx)
	require.NoError(t, err)
	assert.True(t, finished)
	require.NoError(t, done.Destroy(ctx))
	require.NoError(t, s.Destroy(ctx))
	require.NoError(t, mod.Unload(ctx))
}

// TestConcurrentUse drives one Context from many goroutines, and a second
// Context on the same device from another thread: device pointers are
// valid in both because both hold the device's primary context.
func TestConcurrentUse(t *testing.T) {
	ctx, c := openContext(t)
	c2, err := c.Driver().NewContext(ctx, 0)
	require.NoError(t, err)
	defer func() { assert.NoError(t, c2.Close()) }()

	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			want := cuda.Bytes(hostInputs(uint64(g), 4096))
			p, err := c.Alloc(ctx, len(want))
			if !assert.NoError(t, err) {
				return
			}
			defer func() { assert.NoError(t, c.Free(ctx, p)) }()
			assert.NoError(t, c.CopyHtoD(ctx, p, want))
			got := make([]byte, len(want))
			assert.NoError(t, c2.CopyDtoH(ctx, got, p), "the other context's thread reads it")
			assert.Equal(t, want, got, "goroutine %d", g)
		})
	}
	wg.Wait()

	// Batching through Do: nested methods run inline on the thread.
	err = c.Do(ctx, func() error {
		p, err := c.Alloc(ctx, 64)
		if err != nil {
			return err
		}
		return c.Free(ctx, p)
	})
	require.NoError(t, err)
}

func TestClosedContext(t *testing.T) {
	d := openDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), gpuTimeout)
	defer cancel()
	c, err := d.NewContext(ctx, 0)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "idempotent")
	_, err = c.Alloc(ctx, 16)
	require.ErrorIs(t, err, cuda.ErrClosed)

	n, err := d.DeviceCount()
	require.NoError(t, err)
	_, err = d.NewContext(ctx, n)
	require.ErrorIs(t, err, cuda.ErrInvalidDevice)
}

// BenchmarkCopyPinned measures host<->device bandwidth from pinned memory
// on a non-blocking stream (b.SetBytes: MB/s is the bandwidth), and
// reports the device-side figure from CUDA events as GB/s.
func BenchmarkCopyPinned(b *testing.B) {
	ctx, c := openContext(b)
	for _, size := range []int{1 << 20, 16 << 20, 256 << 20} {
		host, err := c.AllocHost(ctx, size)
		require.NoError(b, err)
		dev, err := c.Alloc(ctx, size)
		require.NoError(b, err)
		s, err := c.NewStream(ctx)
		require.NoError(b, err)
		start, err := c.NewEvent(ctx, true)
		require.NoError(b, err)
		end, err := c.NewEvent(ctx, true)
		require.NoError(b, err)
		for _, dir := range []string{"HtoD", "DtoH"} {
			b.Run(fmt.Sprintf("%s/size=%dMiB", dir, size>>20), func(b *testing.B) {
				b.SetBytes(int64(size))
				var device time.Duration
				for b.Loop() {
					require.NoError(b, start.Record(ctx, s))
					if dir == "HtoD" {
						require.NoError(b, c.CopyHtoDAsync(ctx, dev, host, s))
					} else {
						require.NoError(b, c.CopyDtoHAsync(ctx, host, dev, s))
					}
					require.NoError(b, end.Record(ctx, s))
					require.NoError(b, s.Synchronize(context.Background()))
					d, err := c.ElapsedTime(ctx, start, end)
					require.NoError(b, err)
					device += d
				}
				b.ReportMetric(float64(size)*float64(b.N)/device.Seconds()/1e9, "device-GB/s")
			})
		}
		require.NoError(b, end.Destroy(ctx))
		require.NoError(b, start.Destroy(ctx))
		require.NoError(b, s.Destroy(ctx))
		require.NoError(b, c.Free(ctx, dev))
		require.NoError(b, c.FreeHost(ctx, host))
	}
}

// BenchmarkCopyPageable is the same copy from ordinary Go memory, for
// comparison with BenchmarkCopyPinned.
func BenchmarkCopyPageable(b *testing.B) {
	ctx, c := openContext(b)
	const size = 16 << 20
	host := make([]byte, size)
	dev, err := c.Alloc(ctx, size)
	require.NoError(b, err)
	defer c.Free(ctx, dev)
	b.SetBytes(size)
	for b.Loop() {
		require.NoError(b, c.CopyHtoD(ctx, dev, host))
	}
}

// BenchmarkLaunch measures one empty kernel launch plus stream
// synchronization through the Context's thread.
func BenchmarkLaunch(b *testing.B) {
	ctx, c := openContext(b)
	mod, err := c.LoadPTX(ctx, testPTX)
	require.NoError(b, err)
	defer mod.Unload(ctx)
	empty, err := mod.Function(ctx, "empty")
	require.NoError(b, err)
	s, err := c.NewStream(ctx)
	require.NoError(b, err)
	defer s.Destroy(ctx)
	for b.Loop() {
		require.NoError(b, c.Launch(ctx, empty, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, s))
		require.NoError(b, s.Synchronize(context.Background()))
	}
}
