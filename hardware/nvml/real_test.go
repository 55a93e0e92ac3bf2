package nvml_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/hardware/nvml"
)

// TestRealGPUs checks this machine's NVML against its CUDA driver: every
// CUDA device is found by UUID and by PCI bus id, with the same total
// memory and, while a context holds the device, about the free memory
// cuMemGetInfo reports. It is skipped without NVML or a GPU.
func TestRealGPUs(t *testing.T) {
	l, err := nvml.OpenLibrary(nvml.DefaultLibrary)
	if errors.Is(err, nvml.ErrNoLibrary) {
		t.Skipf("no NVML: %v", err)
	}
	require.NoError(t, err)
	defer func() { assert.NoError(t, l.Close()) }()
	d, err := cuda.Open()
	if errors.Is(err, cuda.ErrNoDriver) {
		t.Skipf("no CUDA driver: %v", err)
	}
	require.NoError(t, err)
	devs, err := d.Devices()
	require.NoError(t, err)
	if len(devs) == 0 {
		t.Skip("no GPU")
	}
	ctx := context.Background()
	for i, info := range devs {
		byUUID, err := l.DeviceByUUID(info.UUID)
		require.NoError(t, err, "device %d", i)
		before, err := byUUID.MemoryInfo()
		require.NoError(t, err, "device %d", i)
		byBus, err := l.DeviceByPCIBusID(info.PCIBusID)
		require.NoError(t, err, "device %d", i)
		m, err := byBus.MemoryInfo()
		require.NoError(t, err, "device %d", i)
		assert.Equal(t, before.TotalBytes, m.TotalBytes, "device %d: the same GPU both ways", i)
		assert.Equal(t, before.TotalBytes, before.FreeBytes+before.UsedBytes, "device %d", i)

		c, err := d.NewContext(ctx, info.Ordinal)
		require.NoError(t, err, "device %d", i)
		free, total, err := c.MemInfo(ctx)
		require.NoError(t, err, "device %d", i)
		after, err := byUUID.MemoryInfo()
		require.NoError(t, err, "device %d", i)
		require.NoError(t, c.Close(), "device %d", i)
		t.Logf("device %d %s %s: NVML total %d free %d (before the context %d); cuMemGetInfo total %d free %d; cuDeviceTotalMem %d",
			i, info.UUID, info.PCIBusID, after.TotalBytes, after.FreeBytes, before.FreeBytes, total, free, info.TotalMemoryBytes)
		// NVML's total can include memory the driver reserves, which
		// CUDA leaves out; allow 5% (other processes also move free).
		tol := 0.05 * float64(after.TotalBytes)
		assert.InDelta(t, float64(after.TotalBytes), float64(total), tol, "device %d total", i)
		assert.InDelta(t, float64(after.FreeBytes), float64(free), tol, "device %d free", i)
	}
}
