//go:build !linux

package hardware_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware"
)

// TestOtherSystemCPUs: without procfs and sysfs (macOS), the real machine
// has the Go runtime's CPUs, all of them allowed, and no GPUs.
func TestOtherSystemCPUs(t *testing.T) {
	m, err := hardware.Discover(context.Background())
	require.NoError(t, err)
	n := runtime.NumCPU()
	assert.Equal(t, n, m.CPU.LogicalCores)
	assert.Len(t, m.CPU.AllowedCPUs, n)
	assert.InDelta(t, float64(n), m.CPU.Usable(), 1e-9)
	assert.Empty(t, m.GPUs)
	if runtime.GOOS == "darwin" {
		assert.NotZero(t, m.Memory.TotalBytes, "hw.memsize")
	}
}
