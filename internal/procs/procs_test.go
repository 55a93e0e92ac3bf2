package procs

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
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

// TestDecideIgnoredUserGOMAXPROCS: a GOMAXPROCS the Go runtime ignores
// (0, negative, garbage, beyond int32) is not the user's decision: the
// runtime kept its default of every CPU, so Decide must still size the
// rank to its share and say the variable was ignored. Before, mpirun -x
// GOMAXPROCS=abc -n 3 on 2 cores left every rank at GOMAXPROCS 2 with the
// reason "GOMAXPROCS=abc set by the user; left alone".
func TestDecideIgnoredUserGOMAXPROCS(t *testing.T) {
	for _, v := range []string{"0", "-1", "abc", " 3", "1e2", "3.0", "99999999999"} {
		d := Decide(Input{UserGOMAXPROCS: v, Current: 2, LocalRanks: 3, AllowedCPUs: 2, OnlineCPUs: 2, MaskShare: 2.0 / 3})
		assert.Equal(t, 1, d.Procs, "GOMAXPROCS=%q: %s", v, d.Reason)
		assert.True(t, d.Change, "GOMAXPROCS=%q: %s", v, d.Reason)
		assert.NotContains(t, d.Reason, "left alone", "GOMAXPROCS=%q", v)
		assert.Contains(t, d.Reason, "ignored", "GOMAXPROCS=%q", v)
		assert.Contains(t, d.Reason, "affinity masks of 3 local ranks", "GOMAXPROCS=%q", v)
	}
	for _, v := range []string{"1", "7", "+3", "03"} {
		d := Decide(Input{UserGOMAXPROCS: v, Current: 5, LocalRanks: 3, AllowedCPUs: 2, OnlineCPUs: 2})
		assert.False(t, d.Change, "GOMAXPROCS=%q: %s", v, d.Reason)
		assert.Contains(t, d.Reason, "set by the user", "GOMAXPROCS=%q", v)
	}
}

// helperEnv makes the test binary, run again by TestUserGOMAXPROCSLikeRuntime,
// print its GOMAXPROCS and exit.
const helperEnv = "PZ_PROCS_TEST_PRINT_GOMAXPROCS"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		fmt.Println(runtime.GOMAXPROCS(0))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestUserGOMAXPROCSLikeRuntime checks userGOMAXPROCS against the Go
// runtime itself: a child process started with GOMAXPROCS=v runs with v
// exactly when userGOMAXPROCS accepts v, and with the default otherwise.
func TestUserGOMAXPROCSLikeRuntime(t *testing.T) {
	run := func(v string, set bool) int {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"=1")
		if set {
			cmd.Env = append(cmd.Env, "GOMAXPROCS="+v)
		} else {
			cmd.Env = slices.DeleteFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, "GOMAXPROCS=") })
		}
		out, err := cmd.Output()
		require.NoError(t, err, "GOMAXPROCS=%q", v)
		n, err := strconv.Atoi(strings.TrimSpace(string(out)))
		require.NoError(t, err, "GOMAXPROCS=%q: %q", v, out)
		return n
	}
	def := run("", false)
	// Not 2147483647: go1.26's runtime crashes on it.
	for _, v := range []string{"1", "3", "+3", "03", "1000", "0", "-0", "-1", "abc", " 3", "3 ", "1e2", "3.0", "2147483648", "99999999999"} {
		got := run(v, true)
		if n, ok := userGOMAXPROCS(v); ok {
			assert.Equal(t, n, got, "GOMAXPROCS=%q is accepted: the runtime should run with it", v)
		} else {
			assert.Equal(t, def, got, "GOMAXPROCS=%q is ignored: the runtime should keep its default", v)
		}
	}
}

// TestDecideSingular: one CPU reads "1 CPU" ("1.00 of this rank's 1 CPUs"
// was printed by pzrun info under mpirun --bind-to core).
func TestDecideSingular(t *testing.T) {
	d := Decide(Input{Current: 2, LocalRanks: 2, AllowedCPUs: 1, OnlineCPUs: 2, MaskShare: 1})
	assert.Equal(t, "affinity masks of 2 local ranks: 1.00 of this rank's 1 CPU are its own", d.Reason)
	d = Decide(Input{Current: 2, LocalRanks: 2, AllowedCPUs: 1, OnlineCPUs: 2})
	assert.Equal(t, "1 CPU bound to this rank (2 local ranks, estimated)", d.Reason)
	d = Decide(Input{UserGOMAXPROCS: "7", Current: 7, LocalRanks: 2, AllowedCPUs: 1, OnlineCPUs: 2})
	assert.Equal(t, "GOMAXPROCS=7 set by the user, more than the 1 CPU this rank may run on; left alone", d.Reason)
}
