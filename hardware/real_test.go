package hardware_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/procs"
)

// meminfoKB reads one /proc/meminfo field independently of the package
// (a different parser: fmt-free field splitting on the whole file).
func meminfoKB(t *testing.T, key string) uint64 {
	t.Helper()
	f, err := os.Open("/proc/meminfo")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == key+":" {
			v, err := strconv.ParseUint(fields[1], 10, 64)
			require.NoError(t, err)
			return v
		}
	}
	t.Fatalf("no %s in /proc/meminfo", key)
	return 0
}

// command runs a tool and returns its trimmed output, skipping the test
// if the tool is missing.
func command(t *testing.T, name string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed: %v", name, err)
	}
	cmd := exec.Command(path, args...)
	// nproc honours OMP_NUM_THREADS and OMP_THREAD_LIMIT; drop them.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OMP_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.Output()
	require.NoError(t, err, "%s %v", name, args)
	return strings.TrimSpace(string(out))
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "%q", s)
	return n
}

func TestRealMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads Linux /proc and /sys")
	}
	m, err := hardware.Discover(context.Background())
	require.NoError(t, err)
	t.Logf("host %+v", m.Host)
	t.Logf("cpu %q: %d logical, %d physical, %d sockets, %d NUMA nodes, %d cache kinds, allowed %s, quota %.2f",
		m.CPU.Model, m.CPU.LogicalCores, m.CPU.PhysicalCores, m.CPU.Sockets, len(m.CPU.NUMANodes),
		len(m.CPU.Caches), hardware.FormatCPUList(m.CPU.AllowedCPUs), m.CPU.CgroupCPUQuota)
	t.Logf("memory %+v", m.Memory)
	t.Logf("gpus %+v warnings %q", m.GPUs, m.Warnings)

	host, err := os.Hostname()
	require.NoError(t, err)
	assert.Equal(t, host, m.Host.Hostname)

	// Memory against /proc/meminfo, read here independently.
	assert.Equal(t, meminfoKB(t, "MemTotal")*1024, m.Memory.HostTotalBytes)
	avail := meminfoKB(t, "MemAvailable") * 1024
	// MemAvailable moves while the tests run; allow 5% of the total.
	assert.InDelta(t, float64(avail), float64(m.Memory.HostAvailableBytes), 0.05*float64(m.Memory.HostTotalBytes))
	assert.LessOrEqual(t, m.Memory.TotalBytes, m.Memory.HostTotalBytes)
	assert.LessOrEqual(t, m.Memory.AvailableBytes, m.Memory.TotalBytes)
	if m.Memory.CgroupLimitBytes > 0 {
		assert.Equal(t, min(m.Memory.CgroupLimitBytes, m.Memory.HostTotalBytes), m.Memory.TotalBytes)
	} else {
		assert.Equal(t, m.Memory.HostTotalBytes, m.Memory.TotalBytes)
	}

	// CPUs against getconf, nproc, sched_getaffinity and the Go runtime.
	assert.Equal(t, atoi(t, command(t, "getconf", "_NPROCESSORS_ONLN")), m.CPU.LogicalCores)
	allowed, err := procs.AllowedCPUs()
	require.NoError(t, err)
	assert.Len(t, m.CPU.AllowedCPUs, allowed, "affinity from /proc/self/status vs sched_getaffinity")
	assert.Len(t, m.CPU.AllowedCPUs, runtime.NumCPU())
	nproc := atoi(t, command(t, "nproc"))
	if q := m.CPU.CgroupCPUQuota; q > 0 && nproc != len(m.CPU.AllowedCPUs) {
		// Newer coreutils also apply the cgroup quota, rounded up.
		assert.Equal(t, int(q+0.999999), nproc)
	} else {
		assert.Equal(t, len(m.CPU.AllowedCPUs), nproc)
	}
	assert.GreaterOrEqual(t, m.CPU.LogicalCores, m.CPU.PhysicalCores)
	assert.Positive(t, m.CPU.PhysicalCores)
	assert.Positive(t, m.CPU.Sockets)
	for _, c := range m.CPU.AllowedCPUs {
		assert.Less(t, c, 1<<20)
	}
	var nodeCPUs []int
	for _, n := range m.CPU.NUMANodes {
		nodeCPUs = append(nodeCPUs, n.CPUs...)
	}
	if len(m.CPU.NUMANodes) > 0 {
		slices.Sort(nodeCPUs)
		assert.Len(t, nodeCPUs, m.CPU.LogicalCores, "every online CPU belongs to one node")
	}

	// GPUs: exactly what the driver reports; none without a driver.
	d, err := cuda.Open()
	if errors.Is(err, cuda.ErrNoDriver) {
		t.Logf("no CUDA driver (%v): expecting zero GPUs and no GPU warning", err)
		assert.Empty(t, m.GPUs)
		for _, w := range m.Warnings {
			assert.NotContains(t, w, "gpu")
		}
		return
	}
	require.NoError(t, err)
	devs, err := d.Devices()
	require.NoError(t, err)
	require.Len(t, m.GPUs, len(devs))
	for i, g := range m.GPUs {
		assert.Equal(t, devs[i].Ordinal, g.Index, "gpu %d", i)
		assert.Equal(t, devs[i].Name, g.Name, "gpu %d", i)
		assert.Equal(t, devs[i].UUID, g.UUID, "gpu %d", i)
		assert.Equal(t, devs[i].TotalMemoryBytes, g.MemoryTotalBytes, "gpu %d", i)
		assert.Equal(t, devs[i].SMCount, g.SMs, "gpu %d", i)
		assert.Equal(t, devs[i].PCIBusID, g.PCIBusID, "gpu %d", i)
		assert.Positive(t, g.MemoryFreeBytes, "gpu %d", i)
		assert.LessOrEqual(t, g.MemoryFreeBytes, g.MemoryTotalBytes, "gpu %d", i)
	}
}

func TestWithCUDADriverNil(t *testing.T) {
	m, err := hardware.Discover(context.Background(), hardware.WithCUDADriver(nil))
	require.NoError(t, err)
	assert.Empty(t, m.GPUs)
	assert.NotNil(t, m.GPUs)
}

// BenchmarkDiscover measures one discovery of this machine without GPUs
// (GPU discovery cost is dominated by the driver creating contexts).
func BenchmarkDiscover(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		if _, err := hardware.Discover(ctx, hardware.WithoutGPUs()); err != nil {
			b.Fatal(err)
		}
	}
}
