package procs

import (
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecide(t *testing.T) {
	cases := []struct {
		name   string
		in     Input
		procs  int
		change bool
	}{
		{"user set", Input{UserGOMAXPROCS: "7", Current: 7, LocalRanks: 16, AllowedCPUs: 16, OnlineCPUs: 16}, 7, false},
		{"alone", Input{Current: 16, LocalRanks: 1, AllowedCPUs: 16, OnlineCPUs: 16}, 16, false},
		{"unknown local", Input{Current: 16, AllowedCPUs: 16, OnlineCPUs: 16}, 16, false},
		{"16 ranks unbound", Input{Current: 16, LocalRanks: 16, AllowedCPUs: 16, OnlineCPUs: 16}, 1, true},
		{"4 ranks unbound", Input{Current: 16, LocalRanks: 4, AllowedCPUs: 16, OnlineCPUs: 16}, 4, true},
		{"3 ranks on 16", Input{Current: 16, LocalRanks: 3, AllowedCPUs: 16, OnlineCPUs: 16}, 5, true},
		{"more ranks than cores", Input{Current: 2, LocalRanks: 4, AllowedCPUs: 2, OnlineCPUs: 2}, 1, true},
		{"bound to core", Input{Current: 1, LocalRanks: 16, AllowedCPUs: 1, OnlineCPUs: 16}, 1, false},
		{"bound to 4 cores", Input{Current: 4, LocalRanks: 4, AllowedCPUs: 4, OnlineCPUs: 16}, 4, false},
		{"bound to socket, 8 ranks per socket", Input{Current: 8, LocalRanks: 16, AllowedCPUs: 8, OnlineCPUs: 16}, 1, true},
		{"quota shared", Input{Current: 16, LocalRanks: 2, AllowedCPUs: 16, OnlineCPUs: 16, Quota: 4}, 2, true},
		{"fractional quota rounds up", Input{Current: 16, LocalRanks: 2, AllowedCPUs: 16, OnlineCPUs: 16, Quota: 2.5}, 2, true},
		{"quota above share", Input{Current: 16, LocalRanks: 4, AllowedCPUs: 16, OnlineCPUs: 16, Quota: 100}, 4, true},
		{"online unknown", Input{Current: 8, LocalRanks: 2, AllowedCPUs: 8}, 4, true},
		{"affinity unknown", Input{Current: 8, LocalRanks: 2, OnlineCPUs: 8}, 4, true},
		{"nothing known", Input{Current: 8, LocalRanks: 2}, 8, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.in)
			assert.Equal(t, c.procs, d.Procs, "case %d: %s", i, d.Reason)
			assert.Equal(t, c.change, d.Change, "case %d: %s", i, d.Reason)
			assert.NotEmpty(t, d.Reason)
		})
	}
}

func TestParseCPUList(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		fail bool
	}{
		{"0", 1, false},
		{"0-1\n", 2, false},
		{"0-3,8,10-11", 7, false},
		{"", 0, false},
		{"3-1", 0, true},
		{"a", 0, true},
		{"0-", 0, true},
	}
	for i, c := range cases {
		n, err := ParseCPUList(c.in)
		if c.fail {
			assert.ErrorIs(t, err, ErrBadCPUList, "case %d", i)
			continue
		}
		assert.NoError(t, err, "case %d", i)
		assert.Equal(t, c.n, n, "case %d", i)
	}
}

func TestCgroupCPUQuotaFS(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	cases := []struct {
		name string
		fs   fstest.MapFS
		want float64
		ok   bool
	}{
		{"no proc", fstest.MapFS{}, 0, false},
		{"v2 unlimited", fstest.MapFS{
			"proc/self/cgroup":      file("0::/\n"),
			"sys/fs/cgroup/cpu.max": file("max 100000\n"),
		}, 0, false},
		{"v2 limited in leaf", fstest.MapFS{
			"proc/self/cgroup":          file("0::/a/b\n"),
			"sys/fs/cgroup/a/b/cpu.max": file("250000 100000\n"),
			"sys/fs/cgroup/a/cpu.max":   file("max 100000\n"),
		}, 2.5, true},
		{"v2 ancestor tighter", fstest.MapFS{
			"proc/self/cgroup":          file("0::/a/b\n"),
			"sys/fs/cgroup/a/b/cpu.max": file("400000 100000\n"),
			"sys/fs/cgroup/a/cpu.max":   file("150000 100000\n"),
		}, 1.5, true},
		{"v1 limited", fstest.MapFS{
			"proc/self/cgroup": file("4:memory:/x\n2:cpu,cpuacct:/job\n"),
			"sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us":  file("300000\n"),
			"sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us": file("100000\n"),
		}, 3, true},
		{"v1 unlimited", fstest.MapFS{
			"proc/self/cgroup":                    file("1:cpu:/\n"),
			"sys/fs/cgroup/cpu/cpu.cfs_quota_us":  file("-1\n"),
			"sys/fs/cgroup/cpu/cpu.cfs_period_us": file("100000\n"),
		}, 0, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, ok := CgroupCPUQuotaFS(c.fs)
			assert.Equal(t, c.ok, ok, "case %d", i)
			assert.InDelta(t, c.want, q, 1e-12, "case %d", i)
		})
	}
}

func TestAllowedCPUs(t *testing.T) {
	n, err := AllowedCPUs()
	require.NoError(t, err)
	// runtime.NumCPU is the affinity mask's size as read at process start.
	assert.Equal(t, runtime.NumCPU(), n)
	assert.GreaterOrEqual(t, OnlineCPUs(), n)
}

func TestApply(t *testing.T) {
	orig := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(orig) })

	t.Run("user set", func(t *testing.T) {
		t.Setenv("GOMAXPROCS", "5")
		r := Apply(1000)
		assert.False(t, r.Change)
		assert.Equal(t, r.Before, r.After)
		assert.Equal(t, orig, runtime.GOMAXPROCS(0))
		assert.Contains(t, r.String(), "set by the user")
	})
	t.Run("many ranks", func(t *testing.T) {
		t.Setenv("GOMAXPROCS", "")
		runtime.GOMAXPROCS(orig)
		// With more local ranks than CPUs every rank gets one.
		r := Apply(4 * OnlineCPUs())
		assert.Equal(t, 1, r.After, r.String())
		assert.Equal(t, 1, runtime.GOMAXPROCS(0))
		assert.Equal(t, orig, r.Before)
	})
}

func TestMaskShare(t *testing.T) {
	mask := func(cpus ...int) CPUMask {
		var m CPUMask
		for _, c := range cpus {
			m[c/64] |= 1 << (c % 64)
		}
		return m
	}
	all16 := mask(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
	for _, tc := range []struct {
		name string
		mine CPUMask
		all  []CPUMask
		want float64
	}{
		{"alone", all16, []CPUMask{all16}, 16},
		{"unbound, 3 ranks", all16, []CPUMask{all16, all16, all16}, 16.0 / 3},
		{"bound to own cores", mask(2, 3), []CPUMask{mask(0, 1), mask(2, 3)}, 2},
		{"overlap", mask(0, 1, 2), []CPUMask{mask(0, 1, 2), mask(2, 3)}, 2.5},
		{"high CPUs", mask(100, 1000), []CPUMask{mask(100, 1000), mask(1000)}, 1.5},
		{"mine missing from all", mask(5), nil, 1},
	} {
		if got := MaskShare(tc.mine, tc.all); got < tc.want-1e-9 || got > tc.want+1e-9 {
			t.Errorf("%s: MaskShare = %v, want %v", tc.name, got, tc.want)
		}
	}
	if n := mask(0, 63, 64, 1023).Count(); n != 4 {
		t.Errorf("Count = %d, want 4", n)
	}
}

func TestDecideWithMasks(t *testing.T) {
	// Unbound 3 ranks on 16 CPUs: 5.33 each, rounded down.
	d := Decide(Input{Current: 16, LocalRanks: 3, AllowedCPUs: 16, OnlineCPUs: 16, MaskShare: 16.0 / 3})
	if d.Procs != 5 || !strings.Contains(d.Reason, "affinity masks of 3 local ranks") {
		t.Errorf("unbound: %+v", d)
	}
	// The quota still caps it.
	d = Decide(Input{Current: 16, LocalRanks: 2, AllowedCPUs: 16, OnlineCPUs: 16, MaskShare: 8, Quota: 4})
	if d.Procs != 2 || !strings.Contains(d.Reason, "quota") {
		t.Errorf("quota: %+v", d)
	}
	// A share below one CPU still gets one P.
	d = Decide(Input{Current: 4, LocalRanks: 8, AllowedCPUs: 2, OnlineCPUs: 4, MaskShare: 0.25})
	if d.Procs != 1 {
		t.Errorf("small share: %+v", d)
	}
	// One rank on the node: its mask, in the singular.
	d = Decide(Input{Current: 2, LocalRanks: 1, AllowedCPUs: 2, OnlineCPUs: 2, MaskShare: 2})
	if d.Procs != 2 || d.Reason != "affinity masks of 1 local rank: 2.00 of this rank's 2 CPUs are its own" {
		t.Errorf("one rank: %+v", d)
	}
	d = Decide(Input{Current: 2, LocalRanks: 1, AllowedCPUs: 2, OnlineCPUs: 2, Quota: 0.5})
	if d.Procs != 1 || d.Reason != "cgroup quota 0.50 CPUs shared by 1 local rank" {
		t.Errorf("one rank, quota: %+v", d)
	}
	// The user's GOMAXPROCS wins.
	d = Decide(Input{UserGOMAXPROCS: "3", Current: 3, LocalRanks: 2, MaskShare: 8})
	if d.Change || d.Procs != 3 {
		t.Errorf("user: %+v", d)
	}
}
