package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware"
)

// TestInfoTableSmallAndUnknown: the table printed sizes in tenths of a GiB
// only, so a rank in a 40 MiB cgroup read "0.0 GiB" for its RAM (as did a
// 32 MiB simulated device), and a machine whose /proc/meminfo and CPU
// lists could not be read showed 0 cores and "0.0 GiB" as if it had none.
// Sizes below a twentieth of a GiB now carry their own unit, and counts
// and totals that are unknown say so.
func TestInfoTableSmallAndUnknown(t *testing.T) {
	recs := []infoRecord{
		{Rank: 0, Host: "small", LogicalCores: 2, PhysicalCores: 2, AllowedCores: 2, NUMANodes: 1, GOMAXPROCS: 2,
			RAMTotalBytes: 40 << 20, RAMAvailableBytes: 0,
			Devices: []hardware.Accelerator{{Name: "sim0", Kind: "sim", MemoryBytes: 32 << 20}}},
		{Rank: 1, Host: "unknown", GOMAXPROCS: 2},
		{Rank: 2, Host: "big", LogicalCores: 16, PhysicalCores: 8, AllowedCores: 4, NUMANodes: 2, GOMAXPROCS: 4,
			RAMTotalBytes: 64 << 30, RAMAvailableBytes: 60 << 30,
			Devices: []hardware.Accelerator{{Name: "sim0", Kind: "sim", MemoryBytes: 64 << 20}}},
	}
	var b bytes.Buffer
	require.NoError(t, infoTable(&b, recs))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 4, b.String())
	small, unknown, big := strings.Fields(lines[1]), lines[2], lines[3]
	assert.Equal(t, []string{"0", "small", "2/2/2", "1", "2", "40.0", "MiB", "0", "B", "sim0", "(sim,", "32.0", "MiB)"}, small)
	assert.NotRegexp(t, `(^|[\s(])0\.0 GiB`, b.String())
	assert.Equal(t, []string{"1", "unknown", "?/?/?", "0", "2", "unknown", "unknown", "-"}, strings.Fields(unknown))
	// Sizes below a GiB are in MiB: a 64 MiB device read "0.1 GiB", and
	// a 256 MiB cgroup limit "0.2 GiB" (helper-138's sizing trial).
	assert.Equal(t, []string{"2", "big", "16/8/4", "2", "4", "64.0", "GiB", "60.0", "GiB", "sim0", "(sim,", "64.0", "MiB)"}, strings.Fields(big))
	assert.Equal(t, "256.0 MiB", gib(256<<20))
	assert.Equal(t, "1.0 GiB", gib(1<<30))
}

// TestInfoWarnings: what the hardware discovery could not read
// (Machine.Warnings) was shown nowhere, so a "?" or "unknown" in the
// table, or a 0 in --json, had no reason beside it; the JSON record
// carries it (warnings) and the table lists it under the rows.
func TestInfoWarnings(t *testing.T) {
	recs := []infoRecord{
		{Rank: 0, Host: "a", LogicalCores: 2, PhysicalCores: 2, AllowedCores: 2, NUMANodes: 1, GOMAXPROCS: 2, RAMTotalBytes: 1 << 30},
		{Rank: 1, Host: "b", GOMAXPROCS: 2, Warnings: []string{"memory: open /proc/meminfo: permission denied"}},
	}
	var b bytes.Buffer
	require.NoError(t, infoTable(&b, recs))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 4, b.String())
	assert.Equal(t, "rank 1: warning: memory: open /proc/meminfo: permission denied", lines[3])

	var js bytes.Buffer
	require.NoError(t, writeJSON(&js, recs[1]))
	assert.Contains(t, js.String(), `"warnings":["memory: open /proc/meminfo: permission denied"]`)
	js.Reset()
	require.NoError(t, writeJSON(&js, recs[0]))
	assert.NotContains(t, js.String(), "warnings", "omitted when none")
}
