package resourceset_test

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/resourceset"
)

// normBusID turns nvidia-smi's "00000000:01:00.0" and sysfs' "0000:01:00.0"
// into one form.
func normBusID(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	dom, rest, ok := strings.Cut(s, ":")
	if !ok {
		return s
	}
	d, err := strconv.ParseUint(dom, 16, 32)
	if err != nil {
		return s
	}
	return strconv.FormatUint(d, 16) + ":" + rest
}

// TestGPUsMatchNvidiaSmi compares the GPUs of this rank's resource set with
// what nvidia-smi reports, matched by UUID. It skips on machines without
// nvidia-smi or without GPUs.
func TestGPUsMatchNvidiaSmi(t *testing.T) {
	smi, err := exec.LookPath("nvidia-smi")
	if err != nil {
		t.Skip("nvidia-smi not found: no NVIDIA driver on this machine")
	}
	out, err := exec.CommandContext(testCtx(t), smi, "--query-gpu=name,uuid,memory.total,pci.bus_id",
		"--format=csv,noheader,nounits").Output()
	if err != nil {
		t.Skipf("nvidia-smi failed: %v", err)
	}
	type smiGPU struct {
		name, busID string
		memMiB      uint64
	}
	want := map[string]smiGPU{}
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		f := strings.Split(line, ",")
		require.Len(t, f, 4, line)
		mem, err := strconv.ParseUint(strings.TrimSpace(f[2]), 10, 64)
		require.NoError(t, err, line)
		want[strings.TrimSpace(f[1])] = smiGPU{strings.TrimSpace(f[0]), normBusID(f[3]), mem}
	}
	if len(want) == 0 {
		t.Skip("nvidia-smi lists no GPU")
	}

	m, err := hardware.Discover(testCtx(t))
	require.NoError(t, err)
	comms, err := local.New(1)
	require.NoError(t, err)
	rs, err := resourceset.New(comms[0], 0, m, nil)
	require.NoError(t, err)
	gpus := rs.GPUs()
	t.Logf("nvidia-smi: %v; resource set: %+v; warnings: %v", want, gpus, m.Warnings)
	// CUDA_VISIBLE_DEVICES may hide some of nvidia-smi's GPUs, never add any.
	require.NotEmpty(t, gpus)
	require.LessOrEqual(t, len(gpus), len(want))
	for i, g := range gpus {
		w, ok := want[g.UUID]
		if !assert.True(t, ok, "GPU %d UUID %q unknown to nvidia-smi", i, g.UUID) {
			continue
		}
		assert.Equal(t, w.name, g.Name, "GPU %d", i)
		assert.Equal(t, w.busID, normBusID(g.PCIBusID), "GPU %d", i)
		assert.Equal(t, w.memMiB, g.MemoryTotalBytes>>20, "GPU %d", i)
		assert.Positive(t, g.SMs, "GPU %d", i)
		assert.Regexp(t, `^\d+\.\d+$`, g.ComputeCapability, "GPU %d", i)
		assert.LessOrEqual(t, g.MemoryFreeBytes, g.MemoryTotalBytes, "GPU %d", i)
		assert.Positive(t, g.MemoryFreeBytes, "GPU %d", i)
	}
}
