package nvml_test

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/nvml"
	"github.com/pzgo/pz/internal/fakenvml"
)

var devs = []fakenvml.Device{
	{UUID: "GPU-00000000-0000-4000-8000-000000000001", PCIBusID: "0000:01:00.0", TotalBytes: 80 << 30, FreeBytes: 79 << 30},
	{UUID: "GPU-00000000-0000-4000-8000-000000000002", PCIBusID: "0000:41:00.0", TotalBytes: 80 << 30, FreeBytes: 12 << 30},
}

// open loads a fresh stand-in with devs, closed when the test ends, and
// returns it with the library's path.
func open(t *testing.T, devs ...fakenvml.Device) (*nvml.Library, string) {
	t.Helper()
	lib := fakenvml.Instance(t)
	fakenvml.Setenv(t, devs...)
	l, err := nvml.OpenLibrary(lib)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	return l, lib
}

func TestMemoryInfo(t *testing.T) {
	l, _ := open(t, devs...)
	for i, d := range devs {
		want := nvml.Memory{TotalBytes: d.TotalBytes, FreeBytes: d.FreeBytes, UsedBytes: d.TotalBytes - d.FreeBytes}
		dev, err := l.DeviceByUUID(d.UUID)
		require.NoError(t, err, "device %d", i)
		assert.Equal(t, d.UUID, dev.ID(), "device %d", i)
		m, err := dev.MemoryInfo()
		require.NoError(t, err, "device %d", i)
		assert.Equal(t, want, m, "device %d by UUID", i)

		dev, err = l.DeviceByPCIBusID(d.PCIBusID)
		require.NoError(t, err, "device %d", i)
		m, err = dev.MemoryInfo()
		require.NoError(t, err, "device %d", i)
		assert.Equal(t, want, m, "device %d by PCI bus id", i)
	}
	// nvidia-smi's form of the bus id, and the short one.
	for _, id := range []string{"00000000:41:00.0", "41:00.0"} {
		dev, err := l.DeviceByPCIBusID(id)
		require.NoError(t, err, id)
		m, err := dev.MemoryInfo()
		require.NoError(t, err, id)
		assert.Equal(t, devs[1].FreeBytes, m.FreeBytes, id)
	}
}

func TestLookupErrors(t *testing.T) {
	l, _ := open(t, devs...)
	cases := []struct {
		name   string
		lookup func() (nvml.Device, error)
		call   string
		code   nvml.Return
		text   string
	}{
		{"unknown UUID", func() (nvml.Device, error) { return l.DeviceByUUID("GPU-ffffffff-0000-4000-8000-000000000001") },
			"nvmlDeviceGetHandleByUUID", nvml.ErrNotFound, "Not Found"},
		{"empty UUID", func() (nvml.Device, error) { return l.DeviceByUUID("") },
			"nvmlDeviceGetHandleByUUID", nvml.ErrInvalidArgument, "Invalid Argument"},
		{"NUL in UUID", func() (nvml.Device, error) { return l.DeviceByUUID(devs[0].UUID + "\x00x") },
			"nvmlDeviceGetHandleByUUID", nvml.ErrInvalidArgument, "contains a NUL byte"},
		{"unknown bus id", func() (nvml.Device, error) { return l.DeviceByPCIBusID("0000:02:00.0") },
			"nvmlDeviceGetHandleByPciBusId_v2", nvml.ErrNotFound, "Not Found"},
		{"malformed bus id", func() (nvml.Device, error) { return l.DeviceByPCIBusID("pci-1") },
			"nvmlDeviceGetHandleByPciBusId_v2", nvml.ErrInvalidArgument, "Invalid Argument"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.lookup()
			require.ErrorIs(t, err, c.code, "case %d", i)
			var e *nvml.Error
			require.ErrorAs(t, err, &e, "case %d", i)
			assert.Equal(t, c.call, e.Call, "case %d", i)
			assert.Equal(t, c.text, e.Message, "case %d", i)
			assert.Contains(t, err.Error(), c.call, "case %d", i)
			assert.Contains(t, err.Error(), c.code.Name(), "case %d", i)
			assert.Contains(t, err.Error(), c.text, "case %d", i)
		})
	}
}

func TestOpenErrors(t *testing.T) {
	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "libnvidia-ml.so.1")
		l, err := nvml.OpenLibrary(path)
		assert.Nil(t, l)
		require.ErrorIs(t, err, nvml.ErrNoLibrary)
		assert.Contains(t, err.Error(), path)
	})
	t.Run("missing symbol", func(t *testing.T) {
		lib := fakenvml.BuildWithout(t, "nvmlDeviceGetMemoryInfo")
		_, err := nvml.OpenLibrary(lib)
		require.ErrorIs(t, err, nvml.ErrNoLibrary)
		assert.Contains(t, err.Error(), "lacks nvmlDeviceGetMemoryInfo")
	})
	t.Run("older PCI lookup only", func(t *testing.T) {
		// NVML before 5.319 has no _v2: the plain name is used.
		lib := fakenvml.BuildWithout(t, "nvmlDeviceGetHandleByPciBusId_v2")
		fakenvml.Setenv(t, devs...)
		l, err := nvml.OpenLibrary(lib)
		require.NoError(t, err)
		defer func() { assert.NoError(t, l.Close()) }()
		dev, err := l.DeviceByPCIBusID(devs[1].PCIBusID)
		require.NoError(t, err)
		m, err := dev.MemoryInfo()
		require.NoError(t, err)
		assert.Equal(t, devs[1].FreeBytes, m.FreeBytes)
	})
	t.Run("driver not loaded", func(t *testing.T) {
		lib := fakenvml.Instance(t)
		t.Setenv(fakenvml.EnvInitError, "9")
		_, err := nvml.OpenLibrary(lib)
		require.ErrorIs(t, err, nvml.ErrNoLibrary)
		require.ErrorIs(t, err, nvml.ErrDriverNotLoaded)
		assert.Contains(t, err.Error(), "nvmlInit_v2")
		assert.Contains(t, err.Error(), "Driver Not Loaded")
	})
	t.Run("no permission", func(t *testing.T) {
		lib := fakenvml.Instance(t)
		t.Setenv(fakenvml.EnvInitError, "4")
		_, err := nvml.OpenLibrary(lib)
		require.ErrorIs(t, err, nvml.ErrNoPermission)
		assert.NotErrorIs(t, err, nvml.ErrNoLibrary, "NVML is there but refuses: a real failure")
		assert.Contains(t, err.Error(), "Insufficient Permissions")
	})
}

func TestOpenEnv(t *testing.T) {
	lib := fakenvml.Instance(t)
	fakenvml.Setenv(t, devs...)
	t.Setenv(nvml.EnvLibrary, lib)
	l, err := nvml.Open()
	require.NoError(t, err)
	assert.Equal(t, lib, l.Path())
	_, err = l.DeviceByUUID(devs[0].UUID)
	assert.NoError(t, err, "the stand-in's devices")
	require.NoError(t, l.Close())

	missing := filepath.Join(t.TempDir(), "nope.so")
	_, err = nvml.OpenEnv(func(k string) string {
		if k == nvml.EnvLibrary {
			return missing
		}
		return ""
	})
	require.ErrorIs(t, err, nvml.ErrNoLibrary)
	assert.Contains(t, err.Error(), nvml.EnvLibrary)
	assert.Contains(t, err.Error(), missing)
}

func TestCloseAndRefcount(t *testing.T) {
	lib := fakenvml.Instance(t)
	fakenvml.Setenv(t, devs...)
	a, err := nvml.OpenLibrary(lib)
	require.NoError(t, err)
	b, err := nvml.OpenLibrary(lib)
	require.NoError(t, err)
	da, err := a.DeviceByUUID(devs[0].UUID)
	require.NoError(t, err)
	db, err := b.DeviceByUUID(devs[0].UUID)
	require.NoError(t, err)

	require.NoError(t, a.Close())
	require.NoError(t, a.Close(), "idempotent")
	_, err = da.MemoryInfo()
	assert.ErrorIs(t, err, nvml.ErrClosed)
	_, err = a.DeviceByUUID(devs[0].UUID)
	assert.ErrorIs(t, err, nvml.ErrClosed)
	m, err := db.MemoryInfo()
	require.NoError(t, err, "NVML counts initializations: b is still open")
	assert.Equal(t, devs[0].FreeBytes, m.FreeBytes)
	require.NoError(t, b.Close())

	st, err := fakenvml.Stats(lib)
	require.NoError(t, err)
	assert.Equal(t, fakenvml.Counters{Inits: 2, Shutdowns: 2, Lookups: 2, MemoryInfo: 1, Refs: 0}, st,
		"one nvmlShutdown per Library, none for calls refused after Close")
}

func TestNilLibrary(t *testing.T) {
	var l *nvml.Library
	_, err := l.DeviceByUUID(devs[0].UUID)
	assert.ErrorIs(t, err, nvml.ErrNoLibrary)
	_, err = l.DeviceByPCIBusID(devs[0].PCIBusID)
	assert.ErrorIs(t, err, nvml.ErrNoLibrary)
	_, err = nvml.Device{}.MemoryInfo()
	assert.ErrorIs(t, err, nvml.ErrNoLibrary)
	assert.NoError(t, l.Close())
	assert.Empty(t, l.Path())
}

// TestConcurrentCalls runs lookups from several goroutines while the
// Library closes: every call either succeeds or returns ErrClosed.
func TestConcurrentCalls(t *testing.T) {
	l, _ := open(t, devs...)
	const goroutines, calls = 4, 50
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			d := devs[g%len(devs)]
			for range calls {
				dev, err := l.DeviceByUUID(d.UUID)
				if err == nil {
					var m nvml.Memory
					if m, err = dev.MemoryInfo(); err == nil && m.FreeBytes != d.FreeBytes {
						err = errors.New("wrong free memory")
					}
				}
				if err != nil && !errors.Is(err, nvml.ErrClosed) {
					errs <- err
					return
				}
			}
		})
	}
	require.NoError(t, l.Close())
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
}

func TestReturnNames(t *testing.T) {
	assert.Equal(t, "NVML_ERROR_NOT_FOUND", nvml.ErrNotFound.Name())
	assert.Equal(t, "NVML_ERROR_12345", nvml.Return(12345).Name())
	assert.Equal(t, "nvml: NVML_ERROR_GPU_IS_LOST", nvml.ErrGPUIsLost.Error())
	e := &nvml.Error{Call: "nvmlDeviceGetMemoryInfo", Device: "GPU-x", Code: nvml.ErrGPUIsLost, Message: "GPU is lost"}
	assert.Equal(t, "nvml: nvmlDeviceGetMemoryInfo(GPU-x): NVML_ERROR_GPU_IS_LOST (15): GPU is lost", e.Error())
}
