package runtimeview_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler"
)

// setProcs sets GOMAXPROCS to n for the test (and the environment
// variable GOMAXPROCS to env), restoring both after it.
func setProcs(t *testing.T, n int, env string) {
	t.Helper()
	t.Setenv("GOMAXPROCS", env)
	before := runtime.GOMAXPROCS(n)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
}

// cpuMachine describes a machine of n CPUs, all allowed, with the given
// cgroup CPU quota (0: none).
func cpuMachine(n int, quota float64) *hardware.Machine {
	allowed := make([]int, n)
	for i := range allowed {
		allowed[i] = i
	}
	return &hardware.Machine{
		Host: hardware.Host{Hostname: "node"},
		CPU:  hardware.CPU{LogicalCores: n, PhysicalCores: n, AllowedCPUs: allowed, CgroupCPUQuota: quota},
		GPUs: []hardware.GPU{},
	}
}

// schedulerWorkers runs n in-process ranks on m and returns each rank's
// count of CPU and device (sim) workers and GOMAXPROCS while the
// schedulers are open.
func schedulerWorkers(t *testing.T, n int, m *hardware.Machine, opts ...runtimeview.Option) (cpu, sim []int, procs int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cpu, sim = make([]int, n), make([]int, n)
	err := runtimeview.RunLocal(ctx, n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		d, err := rt.Scheduler(ctx)
		if err != nil {
			return err
		}
		for _, w := range d.Local().Workers() {
			switch w.Kind {
			case scheduler.CPUWorker:
				cpu[rt.Rank()]++
			case scheduler.SimWorker:
				sim[rt.Rank()]++
			}
		}
		if err := rt.Barrier(ctx); err != nil { // every rank's scheduler is open
			return err
		}
		if rt.Rank() == 0 {
			procs = runtime.GOMAXPROCS(0)
		}
		return rt.Barrier(ctx)
	}, append([]runtimeview.Option{runtimeview.WithMachine(m), quietLogs}, opts...)...)
	require.NoError(t, err)
	return cpu, sim, procs
}

// A GOMAXPROCS environment variable that the Go runtime ignores (0, -1,
// abc) is no choice of the user's: the schedulers still get their spare
// P, as without the variable. They used to go without it, as if the user
// had sized GOMAXPROCS.
func TestSchedulerIgnoresIgnoredGOMAXPROCS(t *testing.T) {
	for _, v := range []string{"0", "-1", "abc"} {
		t.Run(v, func(t *testing.T) {
			setProcs(t, 4, v)
			cpu, _, procs := schedulerWorkers(t, 2, cpuMachine(4, 0))
			require.Equal(t, []int{2, 2}, cpu, "each rank's share of 4 Ps")
			require.Equal(t, 5, procs, "GOMAXPROCS=%s: one P beyond the workers", v)
			require.Equal(t, 4, runtime.GOMAXPROCS(0), "Close gives the spare P back")
		})
	}
	t.Run("user's 4", func(t *testing.T) {
		setProcs(t, 4, "4") // the user's choice: no spare P
		cpu, _, procs := schedulerWorkers(t, 1, cpuMachine(4, 0))
		require.Equal(t, []int{4}, cpu)
		require.Equal(t, 4, procs)
	})
}

// In-process ranks under a cgroup CPU quota share the quota's cores
// (rounded up), not GOMAXPROCS, which the Go runtime makes at least 2
// under a quota of one core: 1 worker, as mpi.Init gives one rank of
// such a node. They used to get a worker per P, plus a spare P. A user's
// GOMAXPROCS still decides.
func TestSchedulerWorkersUnderQuota(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   string
		quota float64
		ranks int
		cpu   []int
		procs int
	}{
		{"one core", "", 1, 1, []int{1}, 4},
		{"1.5 cores", "", 1.5, 1, []int{2}, 4},
		{"2.5 cores, 2 ranks", "", 2.5, 2, []int{2, 1}, 4},
		{"one core, 2 ranks", "", 1, 2, []int{1, 1}, 4}, // at least one each
		{"quota above the Ps", "", 8, 1, []int{4}, 5},
		{"user's GOMAXPROCS", "4", 1, 1, []int{4}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setProcs(t, 4, tc.env)
			cpu, _, procs := schedulerWorkers(t, tc.ranks, cpuMachine(4, tc.quota))
			require.Equal(t, tc.cpu, cpu, "CPU workers per rank")
			require.Equal(t, tc.procs, procs, "GOMAXPROCS with the schedulers open")
			require.Equal(t, 4, runtime.GOMAXPROCS(0))
		})
	}
}

// Each device's worker takes a core from the rank's CPU workers, as in
// scheduler.New (docs/devices.md): a rank with 2 simulated devices on 4
// Ps has 2 CPU workers, not 4 (6 workers on 4 cores). At least one CPU
// worker stays.
func TestSchedulerDeviceWorkersTakeCores(t *testing.T) {
	setProcs(t, 4, "")
	dev := accel.SimConfig{Memory: 16 << 20}
	cpu, sim, _ := schedulerWorkers(t, 1, cpuMachine(4, 0), runtimeview.WithSimDevices(dev, dev))
	require.Equal(t, []int{2}, cpu)
	require.Equal(t, []int{2}, sim)
	cpu, sim, _ = schedulerWorkers(t, 2, cpuMachine(4, 0), runtimeview.WithSimDevices(dev, dev))
	require.Equal(t, []int{1, 1}, cpu)
	require.Equal(t, []int{2, 2}, sim)
}
