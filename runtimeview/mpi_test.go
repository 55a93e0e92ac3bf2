//go:build mpi

package runtimeview_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/mpi"
	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
	"github.com/pzgo/pz/internal/launch"
	"github.com/pzgo/pz/internal/lockedbuf"
	"github.com/pzgo/pz/internal/mpiclib"
	"github.com/pzgo/pz/logger"
	"github.com/pzgo/pz/resourceset"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// mpiModeEnv tells a TestMPIWorld process started by mpirun what to check:
// "start" (New initializes MPI and Close finalizes it) or "adopt" (the
// program initialized MPI; New adopts the world and then a
// sub-communicator, and leaves MPI running) or "addr" (the device
// collectives on memory MPI reaches by address).
const mpiModeEnv = "PZ_RUNTIMEVIEW_MPI_MODE"

// TestMPIWorld runs the checks of the local backend (checkView) on the MPI
// world. Under mpirun it is one rank of the job; otherwise it starts the
// jobs itself with mpirun for 1 to 4 ranks, and skips if there is no
// mpirun. MPI can be initialized once per process, hence one job per mode.
func TestMPIWorld(t *testing.T) {
	if !launch.Detect(os.Getenv).Launched() {
		spawnMPI(t)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	switch mode := os.Getenv(mpiModeEnv); mode {
	case "start":
		checkMPIStart(t, ctx)
	case "adopt":
		checkMPIAdopt(t, ctx)
	case "addr":
		checkMPIByAddress(t, ctx)
	case "nccl":
		checkMPINCCL(t, ctx)
	default:
		t.Skipf("under mpirun without %s", mpiModeEnv)
	}
}

func spawnMPI(t *testing.T) {
	lau, _ := launch.For(mpi.Library())
	mpirun, err := lau.Run()
	if err != nil {
		t.Skip("mpirun not found: install Open MPI (Debian: openmpi-bin) to test the MPI backend")
	}
	for _, tc := range []struct {
		mode  string
		ranks []int
	}{{"start", []int{1, 2, 3, 4}}, {"adopt", []int{2, 3}}, {"addr", []int{2, 3}}, {"nccl", []int{2, 3}}} {
		for _, n := range tc.ranks {
			t.Run(fmt.Sprintf("%s/ranks=%d", tc.mode, n), func(t *testing.T) {
				if tc.mode == "nccl" {
					ncclProcesses(t)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				args := lau.Args(n)
				args = append(args, os.Args[0], "-test.run=^TestMPIWorld$", "-test.count=1", "-test.v")
				cmd := exec.CommandContext(ctx, mpirun, args...)
				cmd.Env = append(os.Environ(), mpiModeEnv+"="+tc.mode,
					"OMPI_MCA_btl_vader_single_copy_mechanism=none") // containers often forbid CMA
				out, err := cmd.CombinedOutput()
				require.NoError(t, ctx.Err(), "mpirun -n %d timed out:\n%s", n, out)
				require.NoError(t, err, "mpirun %s:\n%s", strings.Join(args, " "), out)
				// Every rank ran the test and passed it.
				assert.Equal(t, n, strings.Count(string(out), "--- PASS: TestMPIWorld"), "%s", out)
			})
		}
	}
}

// jobSize is the job's size as the launcher tells it, read independently
// of MPI.
func jobSize(t *testing.T) int {
	t.Helper()
	info := launch.Detect(os.Getenv)
	require.Positive(t, info.Size)
	return info.Size
}

func checkMPIStart(t *testing.T, ctx context.Context) {
	require.False(t, mpi.Initialized())
	buf := &lockedbuf.Buffer{}
	rt, err := runtimeview.New(ctx,
		runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), runtimeview.WithSimDevices(simDevices...),
		runtimeview.WithLogOptions(logger.WithEnv(nil), logger.WithWriter(buf), logger.WithFormat(logger.JSON)))
	require.NoError(t, err)
	assert.Equal(t, runtimeview.MPI, rt.Backend())
	require.NotNil(t, rt.MPIWorld())
	assert.True(t, rt.MPIWorld().Started(), "New initialized MPI")
	assert.Equal(t, jobSize(t), rt.Size())
	assert.Equal(t, launch.Detect(os.Getenv).Rank, rt.Rank())

	after := checkView(t, ctx, rt)
	checkDevices(t, ctx, rt)

	// Root-only logging: each process has its own buffer.
	rt.Logger().Info("only the root prints this")
	rt.MyResourceSet().Logger().Info("every rank prints this")
	out := buf.String()
	assert.Equal(t, rt.Rank() == 0, strings.Contains(out, "only the root prints this"), "rank %d: %q", rt.Rank(), out)
	assert.Contains(t, out, fmt.Sprintf(`"rank":%d`, rt.Rank()))
	assert.Contains(t, out, "every rank prints this")

	require.NoError(t, rt.Close())
	require.NoError(t, rt.Close())
	after()
	assert.False(t, mpi.Initialized(), "Close finalized the MPI that New started")
	// Collectives after Close fail, as on the embedded backend.
	_, err = runtimeview.AllReduce(ctx, rt, []int{1}, comm.Sum)
	require.ErrorIs(t, err, comm.ErrFreed)
	require.ErrorContains(t, err, "MPI was finalized (World.Finalize, or the Close of the RuntimeView that owns it)")
	require.ErrorIs(t, rt.Barrier(ctx), comm.ErrFreed)
}

func checkMPIAdopt(t *testing.T, ctx context.Context) {
	// The embedding program initializes MPI itself.
	w, err := mpi.Init(ctx)
	require.NoError(t, err)
	require.True(t, w.Started())

	rt, err := runtimeview.New(ctx, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), quietLogs)
	require.NoError(t, err)
	assert.Equal(t, runtimeview.MPI, rt.Backend())
	assert.False(t, rt.MPIWorld().Started(), "New adopted the initialized MPI")
	assert.Equal(t, jobSize(t), rt.Size())
	after := checkView(t, ctx, rt)
	require.NoError(t, rt.Close())
	after()
	assert.True(t, mpi.Initialized(), "Close leaves an adopted MPI running")

	// A sub-communicator: even and odd world ranks.
	sub, err := w.Split(ctx, w.Rank()%2, w.Rank())
	require.NoError(t, err)
	rt2, err := runtimeview.New(ctx, runtimeview.WithComm(sub), runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), quietLogs)
	require.NoError(t, err)
	assert.Equal(t, runtimeview.Adopted, rt2.Backend())
	assert.Equal(t, (w.Size()+1-w.Rank()%2)/2, rt2.Size())
	assert.Equal(t, w.Rank()/2, rt2.Rank())
	after2 := checkView(t, ctx, rt2)
	require.NoError(t, rt2.Close())
	after2()
	require.NoError(t, sub.Barrier(ctx), "Close does not free an adopted communicator")
	require.NoError(t, sub.Free())

	// A communicator a C library made (odd and even world ranks, in
	// reverse order), and pz's communicator handed back to the library.
	h, crank, csize, err := mpiclib.Split(2)
	require.NoError(t, err)
	rt3, err := runtimeview.New(ctx, runtimeview.WithMPIComm(h), runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), quietLogs)
	require.NoError(t, err)
	assert.Equal(t, runtimeview.MPI, rt3.Backend())
	assert.Equal(t, crank, rt3.Rank())
	assert.Equal(t, csize, rt3.Size())
	after3 := checkView(t, ctx, rt3)
	back, err := mpi.HandleOf(rt3.Comm())
	require.NoError(t, err)
	n, err := mpiclib.Sum(back, 1)
	require.NoError(t, err)
	assert.Equal(t, csize, n)
	require.NoError(t, rt3.Close())
	after3()
	n, err = mpiclib.Sum(h, 1)
	require.NoError(t, err, "Close leaves the library's communicator")
	assert.Equal(t, csize, n)
	require.NoError(t, mpiclib.Free(h))
	require.NoError(t, w.Finalize())
	assert.False(t, mpi.Initialized())
}

// failModeEnv makes TestMPIRankErrorAbortsJob, under mpirun, the job in
// which rank 2 returns an error while the others wait in a barrier.
const failModeEnv = "PZ_RUNTIMEVIEW_MPI_FAIL"

// A rank whose function returns an error under MPI ends the whole job
// within seconds, naming the rank and the error, instead of leaving the
// others waiting in their next collective for ever.
func TestMPIRankErrorAbortsJob(t *testing.T) {
	if launch.Detect(os.Getenv).Launched() {
		if os.Getenv(failModeEnv) == "" {
			t.Skipf("under mpirun without %s", failModeEnv)
		}
		err := runtimeview.Run(context.Background(), 0, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
			if rt.Rank() == 2 {
				return fmt.Errorf("rank two gives up")
			}
			return rt.Barrier(ctx) // never completes: rank 2 never arrives
		}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()))
		t.Fatalf("Run returned (%v) instead of the job ending", err)
		return
	}
	lau, _ := launch.For(mpi.Library())
	mpirun, err := lau.Run()
	if err != nil {
		t.Skip("mpirun not found: install Open MPI (Debian: openmpi-bin) to test the MPI backend")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := lau.Args(3)
	args = append(args, os.Args[0], "-test.run=^TestMPIRankErrorAbortsJob$", "-test.count=1")
	cmd := exec.CommandContext(ctx, mpirun, args...)
	cmd.Env = append(os.Environ(), failModeEnv+"=1", "OMPI_MCA_btl_vader_single_copy_mechanism=none")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	require.NoError(t, ctx.Err(), "the job did not end:\n%s", out)
	require.Error(t, err, "mpirun succeeded:\n%s", out)
	assert.Contains(t, string(out), "pz: rank 2 of 3 failed: rank two gives up", "%s", out)
	assert.Less(t, time.Since(start), time.Minute, "%s", out)
}

// quietFailModeEnv makes TestMPIFailedRankIgnoresAbortSignal, under
// mpirun, the job in which the ranks fail: "all" (every rank returns an
// error after a barrier) or "one" (rank 1 returns one while the others
// wait in a barrier).
const quietFailModeEnv = "PZ_RUNTIMEVIEW_MPI_QUIETFAIL"

// A rank that is already ending the job because its function failed (it
// said "pz: rank R of N failed" and is aborting) does not announce a
// signal-driven end as well when Open MPI, aborting the job, sends SIGTERM
// to every rank: that announcement ("signal received: ending the rank's
// work", "terminated received: ending the job") misreported why the job
// ended. A rank that was not ending yet still reports the signal.
func TestMPIFailedRankIgnoresAbortSignal(t *testing.T) {
	if launch.Detect(os.Getenv).Launched() {
		mode := os.Getenv(quietFailModeEnv)
		if mode == "" {
			t.Skipf("under mpirun without %s", quietFailModeEnv)
		}
		err := runtimeview.Run(context.Background(), 0, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
			if mode == "one" && rt.Rank() != 1 {
				return rt.Barrier(ctx) // never completes: rank 1 never arrives
			}
			if err := rt.Barrier(ctx); mode == "all" && err != nil {
				return err
			}
			return fmt.Errorf("rank %d gives up", rt.Rank())
		}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()),
			runtimeview.WithLogOptions(logger.WithEnv(nil)))
		t.Fatalf("Run returned (%v) instead of the job ending", err)
		return
	}
	lau, _ := launch.For(mpi.Library())
	mpirun, err := lau.Run()
	if err != nil {
		t.Skip("mpirun not found: install Open MPI (Debian: openmpi-bin) to test the MPI backend")
	}
	for _, mode := range []string{"all", "one"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			args := append(lau.Args(3), os.Args[0], "-test.run=^TestMPIFailedRankIgnoresAbortSignal$", "-test.count=1")
			cmd := exec.CommandContext(ctx, mpirun, args...)
			cmd.Env = append(os.Environ(), quietFailModeEnv+"="+mode, "OMPI_MCA_btl_vader_single_copy_mechanism=none")
			out, err := cmd.CombinedOutput()
			require.NoError(t, ctx.Err(), "the job did not end:\n%s", out)
			require.Error(t, err, "mpirun succeeded:\n%s", out)
			text := string(out)
			if mode == "one" {
				assert.Contains(t, text, "pz: rank 1 of 3 failed: rank 1 gives up", "%s", text)
			}
			failed := 0
			for r := range 3 {
				if !strings.Contains(text, fmt.Sprintf("pz: rank %d of 3 failed: rank %d gives up", r, r)) {
					continue // killed before it failed, or (mode "one") not failing
				}
				failed++
				assert.NotContains(t, text, fmt.Sprintf("pz: rank %d of 3: terminated received", r), "rank %d announced the launcher's SIGTERM after its failure:\n%s", r, text)
				assert.NotRegexp(t, fmt.Sprintf(`WARN\s+rank %d\s+signal received`, r), text, "rank %d logged the launcher's SIGTERM after its failure:\n%s", r, text)
			}
			assert.Positive(t, failed, "no rank said it failed:\n%s", text)
			t.Logf("mode %s, %d ranks said they failed:\n%s", mode, failed, text)
		})
	}
}

// checkMPIByAddress gives every rank a device whose memory MPI reaches by
// address (accel.SimConfig.Addressable, host memory outside Go's heap,
// standing in for a CUDA GPU under a CUDA-aware MPI): every device
// collective runs through MPI on the device buffers, with no copy to or
// from the device, and gives the values of the staging path.
func checkMPIByAddress(t *testing.T, ctx context.Context) {
	rt, err := runtimeview.New(ctx, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()),
		runtimeview.WithSimDevices(accel.SimConfig{Memory: 16 << 20, Addressable: true}), quietLogs)
	require.NoError(t, err)
	defer func() { require.NoError(t, rt.Close()) }()
	dc, ok := rt.Comm().(comm.DeviceComm)
	require.True(t, ok, "the MPI comm runs collectives by address")
	require.True(t, dc.Reaches("host"))
	size, me := rt.Size(), rt.Rank()
	dev := rt.MyResourceSet().Devices()[0]
	sim := dev.Accel().(*accel.Sim)
	put := func(x []float64) *resourceset.DeviceSlice[float64] { return putDev(t, ctx, dev, x) }
	get := func(s *resourceset.DeviceSlice[float64]) []float64 { return getDev(t, ctx, s) }
	vals := seqF64
	byAddr := func(what string, f func()) {
		in, out, within := sim.Copies()
		f()
		in2, out2, within2 := sim.Copies()
		require.Equal(t, [3]int64{in, out, within}, [3]int64{in2, out2, within2}, "%s on rank %d: no copy to or from the device", what, me)
	}
	const m = 1000
	root := rt.ResourceSet(size - 1).Devices()[0]
	isRoot := me == size-1

	buf := put(vals(100*me, m))
	byAddr("BcastDevice", func() { require.NoError(t, resourceset.BcastDevice(ctx, root, buf)) })
	require.Equal(t, vals(100*(size-1), m), get(buf))

	require.NoError(t, buf.CopyFrom(ctx, vals(me, m)))
	var into *resourceset.DeviceSlice[float64]
	if isRoot {
		into = put(make([]float64, m))
	}
	byAddr("ReduceDevice", func() {
		ok, err := resourceset.ReduceDevice(ctx, root, buf, into, comm.Sum)
		require.NoError(t, err)
		require.Equal(t, isRoot, ok)
	})
	sum := make([]float64, m)
	for i := range sum {
		sum[i] = float64(size*i + size*(size-1)/2)
	}
	if isRoot {
		require.Equal(t, sum, get(into))
		into.Free()
	}
	byAddr("AllReduceDevice", func() { require.NoError(t, runtimeview.AllReduceDevice(ctx, rt, buf, comm.Sum)) })
	require.Equal(t, sum, get(buf))
	buf.Free()

	// Rank r gathers r+1 values; the total is size(size+1)/2.
	total := size * (size + 1) / 2
	var want []float64
	for r := range size {
		want = append(want, vals(10*r, r+1)...)
	}
	mine := put(vals(10*me, me+1))
	into = nil
	if isRoot {
		into = put(make([]float64, total))
	}
	byAddr("GatherDevice", func() {
		ok, err := resourceset.GatherDevice(ctx, root, mine, into)
		require.NoError(t, err)
		require.Equal(t, isRoot, ok)
	})
	if isRoot {
		require.Equal(t, want, get(into))
		into.Free()
	}
	all := put(make([]float64, total))
	byAddr("AllGatherDevice", func() { require.NoError(t, runtimeview.AllGatherDevice(ctx, rt, mine, all)) })
	require.Equal(t, want, get(all))
	all.Free()
	mine.Free()

	var from *resourceset.DeviceSlice[float64]
	if isRoot {
		from = put(vals(0, size*m))
	}
	part := put(make([]float64, m))
	byAddr("ScatterDevice", func() { require.NoError(t, resourceset.ScatterDevice(ctx, root, from, part)) })
	require.Equal(t, vals(me*m, m), get(part))
	part.Free()
	if from != nil {
		from.Free()
	}
}

// checkMPINCCL: ranks in separate processes, each with a GPU of its own
// of the stand-in driver (rank r uses GPU r; spawnMPI points every rank
// at one instance and turns on the stand-in NCCL's cross-process mode),
// run every device collective on NCCL: right values, NCCL calls made in
// this process, no staging copy through page-locked host memory.
func checkMPINCCL(t *testing.T, ctx context.Context) {
	rt, err := runtimeview.New(ctx, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), runtimeview.WithCUDA(-1), quietLogs)
	require.NoError(t, err)
	defer func() { require.NoError(t, rt.Close()) }()
	size, me := rt.Size(), rt.Rank()
	devs := rt.MyResourceSet().Devices()
	require.GreaterOrEqual(t, len(devs), size, "a stand-in GPU per rank")
	dev := devs[me]
	gpu := dev.Accel().(*cuda.Accel)
	lib := os.Getenv(cuda.EnvNCCLLibrary)
	const m = 1000
	onGPUs := func(what string, f func()) {
		t.Helper()
		throughNCCL(t, lib, gpu, fmt.Sprintf("%s on rank %d", what, me), f)
	}
	buf := putDev(t, ctx, dev, seqF64(me, m))
	onGPUs("AllReduceDevice", func() { require.NoError(t, runtimeview.AllReduceDevice(ctx, rt, buf, comm.Sum)) })
	sum := make([]float64, m)
	for i := range sum {
		sum[i] = float64(size*i + size*(size-1)/2)
	}
	require.Equal(t, sum, getDev(t, ctx, buf))

	root := rt.ResourceSet(size - 1).Devices()[size-1]
	isRoot := me == size-1
	require.NoError(t, buf.CopyFrom(ctx, seqF64(100*me, m)))
	onGPUs("BcastDevice", func() { require.NoError(t, resourceset.BcastDevice(ctx, root, buf)) })
	require.Equal(t, seqF64(100*(size-1), m), getDev(t, ctx, buf))
	require.NoError(t, buf.CopyFrom(ctx, seqF64(me, m)))
	var sumInto *resourceset.DeviceSlice[float64]
	if isRoot {
		sumInto = putDev(t, ctx, dev, make([]float64, m))
	}
	onGPUs("ReduceDevice", func() {
		ok, err := resourceset.ReduceDevice(ctx, root, buf, sumInto, comm.Sum)
		require.NoError(t, err)
		require.Equal(t, isRoot, ok)
	})
	if isRoot {
		require.Equal(t, sum, getDev(t, ctx, sumInto))
		sumInto.Free()
	}
	buf.Free()

	// Rank r gathers r+1 values, and scatters back.
	total := size * (size + 1) / 2
	var want []float64
	for r := range size {
		want = append(want, seqF64(10*r, r+1)...)
	}
	mine := putDev(t, ctx, dev, seqF64(10*me, me+1))
	var into *resourceset.DeviceSlice[float64]
	if isRoot {
		into = putDev(t, ctx, dev, make([]float64, total))
	}
	onGPUs("GatherDevice", func() {
		ok, err := resourceset.GatherDevice(ctx, root, mine, into)
		require.NoError(t, err)
		require.Equal(t, isRoot, ok)
	})
	if isRoot {
		require.Equal(t, want, getDev(t, ctx, into))
		into.Free()
	}
	all := putDev(t, ctx, dev, make([]float64, total))
	onGPUs("AllGatherDevice", func() { require.NoError(t, runtimeview.AllGatherDevice(ctx, rt, mine, all)) })
	require.Equal(t, want, getDev(t, ctx, all))
	all.Free()
	mine.Free()
	var from *resourceset.DeviceSlice[float64]
	if isRoot {
		from = putDev(t, ctx, dev, seqF64(0, size*m))
	}
	part := putDev(t, ctx, dev, make([]float64, m))
	onGPUs("ScatterDevice", func() { require.NoError(t, resourceset.ScatterDevice(ctx, root, from, part)) })
	require.Equal(t, seqF64(me*m, m), getDev(t, ctx, part))
	part.Free()
	if from != nil {
		from.Free()
	}
}

// ncclProcesses points the ranks mpirun starts at one instance of the
// stand-in driver and NCCL (internal/fakecuda) with a GPU for each rank
// and its NCCL's cross-process mode on (the environment is mpirun's, which
// its ranks inherit).
func ncclProcesses(t *testing.T) {
	lib := fakecuda.Instance(t) // skips without a C compiler
	fakecuda.Setenv(t, 4, 64<<20)
	fakecuda.SetLibraries(t, lib)
	fakecuda.SetDelay(t, 0)
	fakecuda.SetNCCLTimeout(t, 20*time.Second)
	t.Setenv(fakecuda.EnvNCCLProcesses, "1")
}

// Under mpirun, SIGTERM to one rank of a program whose main is Run ends
// the job: that rank's function returns (its context ended), it says why,
// runs its callbacks once, last pushed first, without MPI_Finalize, and
// aborts the job; nothing reports MPI as finalized under a running rank.
func TestMPISignalEndsJob(t *testing.T) {
	if launch.Detect(os.Getenv).Launched() {
		t.Skip("starts mpirun")
	}
	lau, _ := launch.For(mpi.Library())
	mpirun, err := lau.Run()
	if err != nil {
		t.Skip("mpirun not found: install Open MPI (Debian: openmpi-bin)")
	}
	file := filepath.Join(t.TempDir(), "finalized.txt")
	args := append(lau.Args(2), os.Args[0], "-test.run=^$")
	cmd := exec.Command(mpirun, args...)
	cmd.Env = append(os.Environ(), childEnv+"=run", childFile+"="+file, "OMPI_MCA_btl_vader_single_copy_mechanism=none")
	pids, wait := startRunChild(t, cmd, 2)
	require.NoError(t, syscall.Kill(pids[1], syscall.SIGTERM))
	status, stderr := wait()
	t.Logf("mpirun: status %d, stderr:\n%s", status, stderr)
	assert.NotEqual(t, 0, status, "mpirun's status after an aborted job")
	assert.Contains(t, stderr, "pz: rank 1 of 2: terminated received: ending the job")
	assert.NotContains(t, stderr, "was finalized")
	assert.NotContains(t, stderr, "did not finish")
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	var mine []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasPrefix(l, "rank 1:") {
			mine = append(mine, l)
		}
	}
	assert.Equal(t, []string{"rank 1: library B finalized", "rank 1: library A finalized"}, mine, "rank 1's callbacks ran once, last pushed first")
}

// spareModeEnv tells a TestMPISchedulerSpareP process started by mpirun
// to check its scheduler's P.
const spareModeEnv = "PZ_RUNTIMEVIEW_SPARE_P"

// TestMPISchedulerSpareP: under mpirun with GOMAXPROCS=abc in the
// environment, which the Go runtime (and mpi.Init) ignores, a rank's
// Scheduler still gives the runtime one P beyond its workers for MPI's
// progress, as without the variable. It used to treat the variable as the
// user's choice and give none.
func TestMPISchedulerSpareP(t *testing.T) {
	if launch.Detect(os.Getenv).Launched() {
		if os.Getenv(spareModeEnv) == "" {
			t.Skipf("under mpirun without %s", spareModeEnv)
		}
		require.Equal(t, "abc", os.Getenv("GOMAXPROCS"))
		err := runtimeview.Run(context.Background(), 0, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
			d, err := rt.Scheduler(ctx)
			if err != nil {
				return err
			}
			cpu := 0
			for _, w := range d.Local().Workers() {
				if w.Kind == scheduler.CPUWorker {
					cpu++
				}
			}
			assert.Equal(t, cpu+1, runtime.GOMAXPROCS(0), "rank %d: one P beyond its %d workers", rt.Rank(), cpu)
			// RunMaster after Scheduler offers the same workers: it used
			// to size them from the GOMAXPROCS Scheduler had raised, one
			// more than the rank's share.
			cpus, err := runtimeview.AllGatherValues(ctx, rt, cpu)
			if err != nil {
				return err
			}
			reg, err := dist.NewRegistry()
			if err != nil {
				return err
			}
			return rt.RunMaster(ctx, 0, reg, func(ctx context.Context, m *dist.Master) error {
				offered := make([]int, rt.Size())
				for w := range m.Workers() {
					offered[m.RankOf(w)]++
				}
				assert.Equal(t, cpus, offered, "workers each rank offers RunMaster, against its Scheduler's CPU workers")
				return nil
			})
		}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), quietLogs)
		require.NoError(t, err)
		return
	}
	lau, _ := launch.For(mpi.Library())
	mpirun, err := lau.Run()
	if err != nil {
		t.Skip("mpirun not found: install Open MPI (Debian: openmpi-bin) to test the MPI backend")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := lau.Args(2)
	args = append(args, os.Args[0], "-test.run=^TestMPISchedulerSpareP$", "-test.count=1", "-test.v")
	cmd := exec.CommandContext(ctx, mpirun, args...)
	cmd.Env = append(os.Environ(), spareModeEnv+"=1", "GOMAXPROCS=abc", "OMPI_MCA_btl_vader_single_copy_mechanism=none")
	out, err := cmd.CombinedOutput()
	require.NoError(t, ctx.Err(), "mpirun timed out:\n%s", out)
	require.NoError(t, err, "mpirun %s:\n%s", strings.Join(args, " "), out)
	assert.Equal(t, 2, strings.Count(string(out), "--- PASS: TestMPISchedulerSpareP"), "%s", out)
}
