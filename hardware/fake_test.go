package hardware_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware"
)

const (
	kiB = 1 << 10
	miB = 1 << 20
	giB = 1 << 30
)

// extractTxtar writes the files of a txtar archive (testdata/NAME.txtar:
// a comment, then "-- path --" lines each followed by the file's
// contents) under a fresh directory and returns it.
func extractTxtar(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".txtar"))
	require.NoError(t, err)
	root := t.TempDir()
	var cur string
	var body strings.Builder
	flush := func() {
		if cur == "" {
			return
		}
		p := filepath.Join(root, filepath.FromSlash(cur))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body.String()), 0o644))
	}
	for line := range strings.Lines(string(data)) {
		trimmed := strings.TrimRight(line, "\n")
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") && len(trimmed) > 6 {
			flush()
			cur = strings.TrimSpace(trimmed[3 : len(trimmed)-3])
			body.Reset()
			continue
		}
		if cur != "" {
			body.WriteString(line)
		}
	}
	flush()
	return root
}

func discoverFake(t *testing.T, name string) *hardware.Machine {
	t.Helper()
	m, err := hardware.Discover(context.Background(), hardware.WithRoot(extractTxtar(t, name)), hardware.WithoutGPUs())
	require.NoError(t, err)
	return m
}

func TestTwoSocketNUMA(t *testing.T) {
	m := discoverFake(t, "numa2")
	assert.Equal(t, "numa2-node", m.Host.Hostname)
	assert.Equal(t, "5.15.0-test", m.Host.Kernel)

	c := m.CPU
	assert.Equal(t, "GenuineIntel", c.Vendor)
	assert.Equal(t, "Intel(R) Xeon(R) Gold 6330 CPU @ 2.00GHz", c.Model)
	assert.Equal(t, 15, c.LogicalCores, "CPU 15 is offline")
	assert.Equal(t, 8, c.PhysicalCores, "2 sockets x 4 cores; core 7 keeps one online thread")
	assert.Equal(t, 2, c.Sockets)
	assert.Equal(t, []int{0, 1, 2, 3, 8, 9, 10, 11}, c.AllowedCPUs)
	assert.Zero(t, c.CgroupCPUQuota)
	assert.Equal(t, 8.0, c.Usable())

	require.Len(t, c.NUMANodes, 2)
	assert.Equal(t, hardware.NUMANode{
		ID: 0, CPUs: []int{0, 1, 2, 3, 8, 9, 10, 11},
		MemoryTotalBytes: 32 * giB, MemoryFreeBytes: 30000000 * kiB, Distances: []int{10, 21},
	}, c.NUMANodes[0])
	assert.Equal(t, hardware.NUMANode{
		ID: 1, CPUs: []int{4, 5, 6, 7, 12, 13, 14},
		MemoryTotalBytes: 32 * giB, MemoryFreeBytes: 31000000 * kiB, Distances: []int{21, 10},
	}, c.NUMANodes[1])

	require.Len(t, c.Caches, 4)
	want := []struct {
		name, typ       string
		level           int
		size            uint64
		ways, instances int
		sharedBy        int
	}{
		{"L1d", "data", 1, 48 * kiB, 12, 8, 2},
		{"L1i", "instruction", 1, 32 * kiB, 8, 8, 2},
		{"L2", "unified", 2, 2 * miB, 20, 8, 2},
		{"L3", "unified", 3, 30 * miB, 12, 2, 8},
	}
	for i, w := range want {
		got := c.Caches[i]
		assert.Equal(t, w.name, got.Name, "cache %d", i)
		assert.Equal(t, w.typ, got.Type, "cache %d", i)
		assert.Equal(t, w.level, got.Level, "cache %d", i)
		assert.Equal(t, w.size, got.SizeBytes, "cache %d", i)
		assert.Equal(t, 64, got.LineBytes, "cache %d", i)
		assert.Equal(t, w.ways, got.Ways, "cache %d", i)
		assert.Len(t, got.Instances, w.instances, "cache %d", i)
		assert.Equal(t, w.sharedBy, got.SharedBy(), "cache %d", i)
	}
	l3 := c.Caches[3]
	assert.Equal(t, [][]int{{0, 1, 2, 3, 8, 9, 10, 11}, {4, 5, 6, 7, 12, 13, 14}}, l3.Instances)
	assert.Equal(t, uint64(60*miB), l3.TotalBytes())
	// The L2 of core 7 is used by CPU 7 alone: its sibling is offline.
	assert.Equal(t, []int{7}, c.Caches[2].Instances[7])

	mem := m.Memory
	assert.Equal(t, uint64(65536000*kiB), mem.HostTotalBytes)
	assert.Equal(t, uint64(60000000*kiB), mem.HostAvailableBytes)
	assert.Equal(t, mem.HostTotalBytes, mem.TotalBytes, "no cgroup limit")
	assert.Equal(t, mem.HostAvailableBytes, mem.AvailableBytes)
	assert.Equal(t, 2, mem.CgroupVersion)
	assert.Zero(t, mem.CgroupLimitBytes)
	assert.Equal(t, uint64(giB), mem.CgroupUsageBytes, "usage of the process's own cgroup")
	assert.Empty(t, m.Warnings)
	assert.Empty(t, m.GPUs)
	assert.NotNil(t, m.GPUs, "GPUs encodes as [] not null")
}

func TestContainers(t *testing.T) {
	cases := []struct {
		name                 string
		version              int
		limit, usage         uint64
		total, available     uint64
		hostTotal, hostAvail uint64
		quota, usable        float64
		logical, physical    int
		sockets              int
	}{
		{
			name: "container-v2", version: 2,
			limit: 2 * giB, usage: 768 * miB,
			// 2 GiB minus a working set of 768 MiB used less 256 MiB inactive file cache.
			total: 2 * giB, available: 2*giB - 512*miB,
			hostTotal: 16 * giB, hostAvail: 12 * giB,
			quota: 1.5, usable: 1.5, logical: 4, physical: 4, sockets: 1,
		},
		{
			name: "kubepods-v2", version: 2,
			limit: 1 * giB, usage: 600 * miB,
			// The pod: 1 GiB limit, 900 MiB used, nothing reclaimable.
			total: 1 * giB, available: 1*giB - 900*miB,
			hostTotal: 32000000 * kiB, hostAvail: 10 * giB,
			quota: 2, usable: 2, logical: 8, physical: 8, sockets: 0,
		},
		{
			name: "docker-v1", version: 1,
			limit: 512 * miB, usage: 300 * miB,
			// 512 MiB minus 300 MiB used less 50 MiB hierarchical inactive file cache.
			total: 512 * miB, available: 512*miB - 250*miB,
			// No MemAvailable: MemFree + Buffers + Cached.
			hostTotal: 8 * giB, hostAvail: 1*giB + 100*miB + 2*giB,
			quota: 0.5, usable: 0.5, logical: 2, physical: 2, sockets: 1,
		},
		{
			name: "v1-unlimited", version: 1,
			limit: 0, usage: 4378624,
			total: 24683620 * kiB, available: 24380108 * kiB,
			hostTotal: 24683620 * kiB, hostAvail: 24380108 * kiB,
			quota: 0, usable: 2, logical: 2, physical: 2, sockets: 0,
		},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := discoverFake(t, c.name)
			mem := m.Memory
			assert.Equal(t, c.version, mem.CgroupVersion, "case %d", i)
			assert.Equal(t, c.limit, mem.CgroupLimitBytes, "case %d", i)
			assert.Equal(t, c.usage, mem.CgroupUsageBytes, "case %d", i)
			assert.Equal(t, c.total, mem.TotalBytes, "case %d", i)
			assert.Equal(t, c.available, mem.AvailableBytes, "case %d", i)
			assert.Equal(t, c.hostTotal, mem.HostTotalBytes, "case %d", i)
			assert.Equal(t, c.hostAvail, mem.HostAvailableBytes, "case %d", i)
			assert.InDelta(t, c.quota, m.CPU.CgroupCPUQuota, 1e-9, "case %d", i)
			assert.InDelta(t, c.usable, m.CPU.Usable(), 1e-9, "case %d", i)
			assert.Equal(t, c.logical, m.CPU.LogicalCores, "case %d", i)
			assert.Equal(t, c.physical, m.CPU.PhysicalCores, "case %d", i)
			assert.Equal(t, c.sockets, m.CPU.Sockets, "case %d", i)
			assert.Empty(t, m.CPU.Caches, "case %d", i)
			assert.Empty(t, m.Warnings, "case %d", i)
		})
	}
}

func TestMalformedAndMissingFiles(t *testing.T) {
	for _, name := range []string{"garbage", "empty"} {
		t.Run(name, func(t *testing.T) {
			var root string
			if name == "empty" {
				root = t.TempDir()
			} else {
				root = extractTxtar(t, name)
			}
			m, err := hardware.Discover(context.Background(), hardware.WithRoot(root), hardware.WithoutGPUs())
			require.NoError(t, err)
			assert.Zero(t, m.CPU.LogicalCores)
			assert.Zero(t, m.CPU.PhysicalCores)
			assert.Empty(t, m.CPU.AllowedCPUs)
			assert.Zero(t, m.CPU.CgroupCPUQuota)
			assert.Zero(t, m.CPU.Usable())
			assert.Zero(t, m.Memory.HostTotalBytes)
			assert.Zero(t, m.Memory.TotalBytes)
			assert.Zero(t, m.Memory.CgroupLimitBytes)
			assert.NotEmpty(t, m.Warnings, "missing essentials are reported")
			b, err := json.Marshal(m)
			require.NoError(t, err)
			for _, list := range []string{"gpus", "caches", "allowed_cpus"} {
				assert.Contains(t, string(b), `"`+list+`":[]`)
			}
			if name == "empty" {
				assert.Contains(t, string(b), `"numa_nodes":[]`)
			} else {
				// node0 exists with unreadable contents; nodeX is ignored.
				require.Len(t, m.CPU.NUMANodes, 1)
				assert.Equal(t, hardware.NUMANode{CPUs: []int{}, Distances: []int{}}, m.CPU.NUMANodes[0])
			}
		})
	}
}

func TestBadRoot(t *testing.T) {
	_, err := hardware.Discover(context.Background(), hardware.WithRoot(filepath.Join(t.TempDir(), "nope")))
	require.ErrorIs(t, err, hardware.ErrBadRoot)

	f := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(f, nil, 0o644))
	_, err = hardware.Discover(context.Background(), hardware.WithRoot(f))
	require.ErrorIs(t, err, hardware.ErrBadRoot)
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := hardware.Discover(ctx)
	require.ErrorIs(t, err, context.Canceled)
}

// TestJSONFieldNames pins the JSON interface: other ranks and
// `pzrun info --json` rely on these names.
func TestJSONFieldNames(t *testing.T) {
	m := discoverFake(t, "numa2")
	m.GPUs = []hardware.GPU{{Index: 0, Name: "x"}}
	m.Warnings = []string{"w"}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	var top map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &top))
	keys := func(raw json.RawMessage) []string {
		var obj map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &obj))
		var ks []string
		for k := range obj {
			ks = append(ks, k)
		}
		return ks
	}
	firstOf := func(raw json.RawMessage) json.RawMessage {
		var arr []json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &arr))
		require.NotEmpty(t, arr)
		return arr[0]
	}
	assert.ElementsMatch(t, []string{"host", "cpu", "memory", "gpus", "warnings"}, keys(b))
	assert.ElementsMatch(t, []string{"hostname", "kernel", "os", "arch"}, keys(top["host"]))
	assert.ElementsMatch(t, []string{"vendor", "model", "logical_cores", "physical_cores", "sockets",
		"numa_nodes", "caches", "allowed_cpus", "cgroup_cpu_quota"}, keys(top["cpu"]))
	assert.ElementsMatch(t, []string{"total_bytes", "available_bytes", "host_total_bytes",
		"host_available_bytes", "cgroup_version", "cgroup_limit_bytes", "cgroup_usage_bytes"}, keys(top["memory"]))
	assert.ElementsMatch(t, []string{"index", "name", "uuid", "memory_total_bytes", "memory_free_bytes",
		"sm_count", "compute_capability", "pci_bus_id"}, keys(firstOf(top["gpus"])))
	var cpu map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(top["cpu"], &cpu))
	assert.ElementsMatch(t, []string{"id", "cpus", "memory_total_bytes", "memory_free_bytes", "distances"},
		keys(firstOf(cpu["numa_nodes"])))
	assert.ElementsMatch(t, []string{"name", "level", "type", "size_bytes", "line_bytes", "ways", "instances"},
		keys(firstOf(cpu["caches"])))

	var back hardware.Machine
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, *m, back, "JSON round trip")
}

// TestAllowedCPUsOnlineOnly: a process nobody bound keeps offline CPUs in
// its mask (Cpus_allowed_list shows every possible CPU on cgroup v2
// hosts and VMs with hot-pluggable CPUs), while sched_getaffinity and the
// Go runtime count only the online ones. Before, numa2 with CPU 15
// offline and an unrestricted mask reported 16 allowed CPUs of 15 logical
// ones (pzrun info: CORES 15/8/16).
func TestAllowedCPUsOnlineOnly(t *testing.T) {
	root := extractTxtar(t, "numa2")
	status := filepath.Join(root, "proc", "self", "status")
	require.NoError(t, os.WriteFile(status, []byte("Name:\tpz\nCpus_allowed:\tffff\nCpus_allowed_list:\t0-15\n"), 0o644))
	m, err := hardware.Discover(context.Background(), hardware.WithRoot(root), hardware.WithoutGPUs())
	require.NoError(t, err)
	assert.Equal(t, 15, m.CPU.LogicalCores)
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, m.CPU.AllowedCPUs, "CPU 15 is offline")
	assert.Equal(t, 15.0, m.CPU.Usable())
	assert.Empty(t, m.Warnings)
}
