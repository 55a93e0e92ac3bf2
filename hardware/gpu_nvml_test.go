package hardware_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/hardware/nvml"
	"github.com/pzgo/pz/internal/fakecuda"
	"github.com/pzgo/pz/internal/fakenvml"
)

// gpuMemory is the memory of each stand-in CUDA device; with nothing
// allocated, a context reports it all free.
const gpuMemory = 64 * miB

// nvmlFree is the free memory the stand-in NVML reports for device i:
// different from the context's, so that a test sees which path was taken.
func nvmlFree(i int) uint64 { return uint64(40-10*i) * miB }

// gpuSetup is a stand-in CUDA driver with two devices and a stand-in NVML
// library, not yet initialized, whose devices are given by the test.
type gpuSetup struct {
	driver *cuda.Driver
	devs   []cuda.DeviceInfo
	nvml   string // the NVML library's path
}

func newGPUSetup(t *testing.T) gpuSetup {
	t.Helper()
	d, _ := fakecuda.Open(t, 2, gpuMemory)
	devs, err := d.Devices()
	require.NoError(t, err)
	require.Len(t, devs, 2)
	return gpuSetup{driver: d, devs: devs, nvml: fakenvml.Instance(t)}
}

// nvmlDevice describes CUDA device i to the stand-in NVML, with the same
// UUID and PCI bus id and nvmlFree(i) free.
func (s gpuSetup) nvmlDevice(i int) fakenvml.Device {
	return fakenvml.Device{UUID: s.devs[i].UUID, PCIBusID: s.devs[i].PCIBusID, TotalBytes: gpuMemory, FreeBytes: nvmlFree(i)}
}

// discover runs Discover on the stand-ins (no other GPU sources), with a
// counter of the context reads.
func (s gpuSetup) discover(t *testing.T, opts ...hardware.Option) (*hardware.Machine, *atomic.Int64) {
	t.Helper()
	var contextReads atomic.Int64
	count := hardware.WithContextFreeMemory(func(ctx context.Context, d *cuda.Driver, ordinal int) (uint64, error) {
		contextReads.Add(1)
		c, err := d.NewContext(ctx, ordinal)
		if err != nil {
			return 0, err
		}
		free, _, err := c.MemInfo(ctx)
		return free, errors.Join(err, c.Close())
	})
	all := append([]hardware.Option{hardware.WithRoot(t.TempDir()), hardware.WithCUDADriver(s.driver), count}, opts...)
	m, err := hardware.Discover(context.Background(), all...)
	require.NoError(t, err)
	require.Len(t, m.GPUs, len(s.devs))
	for i, g := range m.GPUs {
		assert.Equal(t, s.devs[i].UUID, g.UUID, "gpu %d", i)
		assert.Equal(t, uint64(gpuMemory), g.MemoryTotalBytes, "gpu %d", i)
	}
	return m, &contextReads
}

func gpuWarnings(m *hardware.Machine) []string {
	var out []string
	for _, w := range m.Warnings {
		if strings.HasPrefix(w, "gpu:") {
			out = append(out, w)
		}
	}
	return out
}

// TestGPUFreeMemoryFromNVML: with an NVML that knows the devices,
// discovery reports NVML's free memory and creates no context.
func TestGPUFreeMemoryFromNVML(t *testing.T) {
	s := newGPUSetup(t)
	fakenvml.Setenv(t, s.nvmlDevice(0), s.nvmlDevice(1))
	m, contextReads := s.discover(t, hardware.WithNVMLLibrary(s.nvml))
	for i, g := range m.GPUs {
		assert.Equal(t, nvmlFree(i), g.MemoryFreeBytes, "gpu %d", i)
	}
	assert.Zero(t, contextReads.Load(), "no context was needed")
	assert.Empty(t, gpuWarnings(m))

	st, err := fakenvml.Stats(s.nvml)
	require.NoError(t, err)
	assert.Equal(t, fakenvml.Counters{Inits: 1, Shutdowns: 1, Lookups: 2, MemoryInfo: 2}, st,
		"one initialization, shut down when discovery ends")
}

// TestGPUFreeMemoryPZNVMLLibrary: PZ_NVML_LIBRARY names the library when
// no option does; WithoutNVML ignores it.
func TestGPUFreeMemoryPZNVMLLibrary(t *testing.T) {
	s := newGPUSetup(t)
	fakenvml.Setenv(t, s.nvmlDevice(0), s.nvmlDevice(1))
	t.Setenv(nvml.EnvLibrary, s.nvml)

	m, contextReads := s.discover(t)
	for i, g := range m.GPUs {
		assert.Equal(t, nvmlFree(i), g.MemoryFreeBytes, "gpu %d", i)
	}
	assert.Zero(t, contextReads.Load())
	assert.Empty(t, gpuWarnings(m))

	m, contextReads = s.discover(t, hardware.WithoutNVML())
	for i, g := range m.GPUs {
		assert.Equal(t, uint64(gpuMemory), g.MemoryFreeBytes, "gpu %d: the context's figure", i)
	}
	assert.EqualValues(t, 2, contextReads.Load())
	st, err := fakenvml.Stats(s.nvml)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Inits, "WithoutNVML does not load it")

	missing := filepath.Join(t.TempDir(), "libnvidia-ml.so.1")
	t.Setenv(nvml.EnvLibrary, missing)
	m, _ = s.discover(t)
	for i, g := range m.GPUs {
		assert.Equal(t, uint64(gpuMemory), g.MemoryFreeBytes, "gpu %d", i)
	}
	w := strings.Join(gpuWarnings(m), "\n")
	assert.Contains(t, w, nvml.EnvLibrary, "a library the environment names must be usable")
	assert.Contains(t, w, missing)
}

// TestGPUFreeMemoryWithoutNVML: without NVML (absent, unusable, or turned
// off) the free memory comes from a context, as before.
func TestGPUFreeMemoryWithoutNVML(t *testing.T) {
	cases := []struct {
		name string
		// opt returns the option under test and what the warnings must
		// say ("" for none).
		opt func(t *testing.T, s gpuSetup) (hardware.Option, string)
	}{
		{"WithoutNVML", func(t *testing.T, s gpuSetup) (hardware.Option, string) {
			return hardware.WithoutNVML(), ""
		}},
		{"missing library", func(t *testing.T, s gpuSetup) (hardware.Option, string) {
			missing := filepath.Join(t.TempDir(), "libnvidia-ml.so.1")
			return hardware.WithNVMLLibrary(missing), missing
		}},
		{"library missing a symbol", func(t *testing.T, s gpuSetup) (hardware.Option, string) {
			return hardware.WithNVMLLibrary(fakenvml.BuildWithout(t, "nvmlDeviceGetMemoryInfo")), "lacks nvmlDeviceGetMemoryInfo"
		}},
		{"NVML refuses", func(t *testing.T, s gpuSetup) (hardware.Option, string) {
			t.Setenv(fakenvml.EnvInitError, fmt.Sprint(int(nvml.ErrNoPermission)))
			return hardware.WithNVMLLibrary(s.nvml), "NVML_ERROR_NO_PERMISSION"
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newGPUSetup(t)
			fakenvml.Setenv(t, s.nvmlDevice(0), s.nvmlDevice(1))
			opt, warning := c.opt(t, s)
			m, contextReads := s.discover(t, opt)
			for j, g := range m.GPUs {
				assert.Equal(t, uint64(gpuMemory), g.MemoryFreeBytes, "case %d gpu %d", i, j)
			}
			assert.EqualValues(t, 2, contextReads.Load(), "case %d", i)
			w := gpuWarnings(m)
			if warning == "" {
				assert.Empty(t, w, "case %d", i)
			} else {
				require.Len(t, w, 1, "case %d", i)
				assert.Contains(t, w[0], warning, "case %d", i)
				assert.Contains(t, w[0], "through CUDA contexts instead", "case %d", i)
			}
		})
	}
}

// TestGPUFreeMemoryUnknownDevice: an NVML that does not know a device
// sends that device, and only that one, to a context.
func TestGPUFreeMemoryUnknownDevice(t *testing.T) {
	s := newGPUSetup(t)
	other := fakenvml.Device{UUID: "GPU-ffffffff-0000-4000-8000-000000000000", PCIBusID: s.devs[0].PCIBusID,
		TotalBytes: gpuMemory, FreeBytes: 1}
	fakenvml.Setenv(t, other, s.nvmlDevice(1))
	m, contextReads := s.discover(t, hardware.WithNVMLLibrary(s.nvml))
	assert.Equal(t, uint64(gpuMemory), m.GPUs[0].MemoryFreeBytes,
		"device 0 from its context: NVML has no such UUID, and the bus id alone is not trusted")
	assert.Equal(t, nvmlFree(1), m.GPUs[1].MemoryFreeBytes, "device 1 from NVML")
	assert.EqualValues(t, 1, contextReads.Load())
	assert.Empty(t, gpuWarnings(m), "an unknown device is no failure")
}

// TestGPUFreeMemoryMIG: NVML spells a MIG instance's UUID "MIG-...",
// where CUDA's DeviceInfo.UUID says "GPU-...": the instance is found.
func TestGPUFreeMemoryMIG(t *testing.T) {
	s := newGPUSetup(t)
	mig := s.nvmlDevice(0)
	mig.UUID = "MIG-" + strings.TrimPrefix(mig.UUID, "GPU-")
	fakenvml.Setenv(t, mig, s.nvmlDevice(1))
	m, contextReads := s.discover(t, hardware.WithNVMLLibrary(s.nvml))
	for i, g := range m.GPUs {
		assert.Equal(t, nvmlFree(i), g.MemoryFreeBytes, "gpu %d", i)
	}
	assert.Zero(t, contextReads.Load())
}

// TestGPUContextFails: where a context cannot be made (exclusive-process
// mode, the GPU busy), the GPU is still listed, with 0 free and the
// reason in the warnings - and with NVML no context is tried at all.
func TestGPUContextFails(t *testing.T) {
	s := newGPUSetup(t)
	busy := &cuda.Error{Call: "cuDevicePrimaryCtxRetain", Code: cuda.ErrDeviceUnavailable,
		Description: "CUDA-capable device(s) is/are busy or unavailable"}
	var contextReads atomic.Int64
	failing := hardware.WithContextFreeMemory(func(context.Context, *cuda.Driver, int) (uint64, error) {
		contextReads.Add(1)
		return 0, busy
	})

	t.Run("without NVML", func(t *testing.T) {
		contextReads.Store(0)
		m, err := hardware.Discover(context.Background(), hardware.WithRoot(t.TempDir()),
			hardware.WithCUDADriver(s.driver), hardware.WithoutNVML(), failing)
		require.NoError(t, err, "a busy GPU does not fail discovery")
		require.Len(t, m.GPUs, 2)
		for i, g := range m.GPUs {
			assert.Equal(t, s.devs[i].UUID, g.UUID, "gpu %d", i)
			assert.Zero(t, g.MemoryFreeBytes, "gpu %d", i)
		}
		w := strings.Join(gpuWarnings(m), "\n")
		for i := range m.GPUs {
			assert.Contains(t, w, fmt.Sprintf("device %d free memory", i))
		}
		assert.Contains(t, w, "cuDevicePrimaryCtxRetain")
		assert.Contains(t, w, "busy or unavailable")
		assert.EqualValues(t, 2, contextReads.Load())
	})

	t.Run("with NVML", func(t *testing.T) {
		contextReads.Store(0)
		fakenvml.Setenv(t, s.nvmlDevice(0), s.nvmlDevice(1))
		m, err := hardware.Discover(context.Background(), hardware.WithRoot(t.TempDir()),
			hardware.WithCUDADriver(s.driver), hardware.WithNVMLLibrary(s.nvml), failing)
		require.NoError(t, err)
		require.Len(t, m.GPUs, 2)
		for i, g := range m.GPUs {
			assert.Equal(t, nvmlFree(i), g.MemoryFreeBytes, "gpu %d", i)
		}
		assert.Empty(t, gpuWarnings(m))
		assert.Zero(t, contextReads.Load())
	})
}

// TestGPUCancelled: a ctx cancelled during discovery is Discover's error.
func TestGPUCancelled(t *testing.T) {
	s := newGPUSetup(t)
	fakenvml.Setenv(t, s.nvmlDevice(0), s.nvmlDevice(1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelling := hardware.WithContextFreeMemory(func(context.Context, *cuda.Driver, int) (uint64, error) {
		cancel() // as if the caller gave up while device 0 was read
		return 0, context.Canceled
	})
	_, err := hardware.Discover(ctx, hardware.WithRoot(t.TempDir()), hardware.WithCUDADriver(s.driver),
		hardware.WithoutNVML(), cancelling)
	require.ErrorIs(t, err, context.Canceled)
}

// TestNVMLMemoryByPCIBusID: a device the driver gives no UUID is found by
// its PCI bus id; with a UUID, the bus id is not used.
func TestNVMLMemoryByPCIBusID(t *testing.T) {
	lib := fakenvml.Instance(t)
	dev := fakenvml.Device{UUID: "GPU-00000000-0000-4000-8000-000000000001", PCIBusID: "00000000:41:00.0",
		TotalBytes: 80 * giB, FreeBytes: 3 * giB}
	fakenvml.Setenv(t, dev)
	l, err := nvml.OpenLibrary(lib)
	require.NoError(t, err)
	defer func() { assert.NoError(t, l.Close()) }()

	m, err := hardware.NVMLMemory(l, "", "0000:41:00.0")
	require.NoError(t, err)
	assert.Equal(t, uint64(3*giB), m.FreeBytes)

	_, err = hardware.NVMLMemory(l, "GPU-ffffffff-0000-4000-8000-000000000001", "0000:41:00.0")
	assert.ErrorIs(t, err, nvml.ErrNotFound)
	_, err = hardware.NVMLMemory(l, "", "0000:42:00.0")
	assert.ErrorIs(t, err, nvml.ErrNotFound)
}
