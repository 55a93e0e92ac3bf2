package runtimeview_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
	"github.com/pzgo/pz/resourceset"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler"
)

// TestCUDADevices gives in-process ranks the GPU of the stand-in driver
// (internal/fakecuda), shared: each rank's resource set has it as a
// device component, AllReduceDevice stages through the GPU's page-locked
// host buffers,
// BcastDevice copies within the GPU, and each rank's scheduler has a GPU
// worker on it.
func TestCUDADevices(t *testing.T) {
	fakecuda.SetDelay(t, 0)
	d, lib := fakecuda.Open(t, 1, 64<<20)
	const ranks = 3
	err := runtimeview.RunLocal(testCtx(t), ranks, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		me := rt.Rank()
		mine := rt.MyResourceSet().Devices()
		require.Len(t, mine, 1)
		require.Equal(t, "cuda0", mine[0].Name())
		require.Equal(t, "cuda", mine[0].Kind())
		require.EqualValues(t, 64<<20, mine[0].MemoryBytes())
		require.Equal(t, "cuda", rt.ResourceSet((me + 1) % ranks).Devices()[0].Kind(), "another rank's GPU as this rank sees it")

		// Over several staging chunks.
		n := 2*resourceset.StagingChunk/8 + 3
		buf, err := resourceset.Alloc[float64](mine[0], n)
		require.NoError(t, err)
		defer buf.Free()
		host := make([]float64, n)
		for i := range host {
			host[i] = float64(me*1000 + i%1000)
		}
		require.NoError(t, buf.CopyFrom(ctx, host))
		gpu := mine[0].Accel().(*cuda.Accel)
		pinned := gpu.PinnedCopies()
		require.NoError(t, runtimeview.AllReduceDevice(ctx, rt, buf, comm.Sum))
		require.Greater(t, gpu.PinnedCopies(), pinned, "AllReduceDevice stages through the GPU's page-locked buffers")
		got := make([]float64, n)
		require.NoError(t, buf.CopyTo(ctx, got))
		for _, i := range []int{0, n / 2, n - 1} {
			require.Equal(t, float64(3000+3*(i%1000)), got[i], "summed element %d on rank %d", i, me)
		}
		root := rt.ResourceSet(ranks - 1).Devices()[0]
		require.NoError(t, buf.CopyFrom(ctx, host))
		require.NoError(t, resourceset.BcastDevice(ctx, root, buf))
		require.NoError(t, buf.CopyTo(ctx, got))
		require.Equal(t, float64((ranks-1)*1000+7), got[7])
		// The ranks share the GPU object: Bcast copied within the GPU.
		_, _, within := gpu.Copies()
		require.Positive(t, within, "BcastDevice between ranks sharing the GPU copies within it")

		s, err := rt.Scheduler(ctx)
		require.NoError(t, err)
		var kinds []scheduler.WorkerKind
		for _, w := range s.Local().Workers() {
			kinds = append(kinds, w.Kind)
		}
		require.Contains(t, kinds, scheduler.CUDAWorker)
		return nil
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), runtimeview.WithCUDA(1), runtimeview.WithCUDADriver(d))
	require.NoError(t, err)
	st, err := fakecuda.Stats(lib)
	require.NoError(t, err)
	require.Zero(t, st.LiveAllocations, "every rank's device buffers freed")
	require.Zero(t, st.InvalidContext)
}

// TestCUDAWithoutDriver: PZ_NCUDA on a machine without a driver gives
// ranks no GPU, and no error; a bad PZ_NCUDA is an error.
func TestCUDAWithoutDriver(t *testing.T) {
	if _, err := cuda.Open(); !cuda.IsNoDriver(err) {
		t.Skip("this machine has a CUDA driver")
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "PZ_NCUDA" {
				return v
			}
			return ""
		}
	}
	err := runtimeview.RunLocal(testCtx(t), 2, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		require.Empty(t, rt.MyResourceSet().Devices())
		return nil
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), runtimeview.WithGetenv(env("-1")))
	require.NoError(t, err)
	err = runtimeview.RunLocal(testCtx(t), 1, func(ctx context.Context, rt *runtimeview.RuntimeView) error { return nil },
		runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), runtimeview.WithGetenv(env("many")))
	require.ErrorIs(t, err, runtimeview.ErrOption)
	require.Contains(t, err.Error(), `PZ_NCUDA="many"`)
}

// TestCUDAAllReduceNCCL: in-process ranks with a GPU each reduce on the
// GPUs through NCCL (the stand-in library's), not through host memory;
// the same call on one GPU shared by both ranks stages.
func TestCUDAAllReduceNCCL(t *testing.T) {
	fakecuda.SetDelay(t, 0)
	d, lib := fakecuda.Open(t, 2, 64<<20)
	fakecuda.SetLibraries(t, lib)
	fakecuda.SetNCCLTimeout(t, 2*time.Second)
	const ranks, n = 2, 1000
	err := runtimeview.RunLocal(testCtx(t), ranks, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		me := rt.Rank()
		gpus := rt.MyResourceSet().Devices()
		require.Len(t, gpus, 2)
		host := make([]float64, n)
		for i := range host {
			host[i] = float64(me*n + i)
		}
		for _, c := range []struct {
			gpu    int // each rank's GPU
			direct bool
		}{{me, true}, {0, false}} {
			buf, err := resourceset.Alloc[float64](gpus[c.gpu], n)
			require.NoError(t, err)
			require.NoError(t, buf.CopyFrom(ctx, host))
			before, err := fakecuda.Stats(lib)
			require.NoError(t, err)
			gpu := gpus[c.gpu].Accel().(*cuda.Accel)
			pinned := gpu.PinnedCopies()
			require.NoError(t, runtimeview.AllReduceDevice(ctx, rt, buf, comm.Sum))
			got := make([]float64, n)
			require.NoError(t, buf.CopyTo(ctx, got))
			for i, x := range got {
				require.Equal(t, float64(2*i+n), x, "element %d on rank %d (GPU %d)", i, me, c.gpu)
			}
			after, err := fakecuda.Stats(lib)
			require.NoError(t, err)
			if c.direct {
				require.Greater(t, after.NCCL, before.NCCL, "rank %d reduced through NCCL", me)
			} else {
				require.Greater(t, gpu.PinnedCopies(), pinned, "rank %d staged on the shared GPU", me)
			}
			buf.Free()
			require.NoError(t, rt.Barrier(ctx)) // the next case starts on every rank together
		}
		return nil
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), runtimeview.WithCUDA(-1), runtimeview.WithCUDADriver(d))
	require.NoError(t, err)
}

// TestCUDARootedNCCL: in-process ranks with a GPU each run the rooted
// device collectives, and AllGatherDevice with equal and with unequal
// lengths, on the GPUs through NCCL (the stand-in's), from every root:
// right values, NCCL calls made, and no staging copy through page-locked
// host memory.
func TestCUDARootedNCCL(t *testing.T) {
	fakecuda.SetDelay(t, 0)
	d, lib := fakecuda.Open(t, 2, 64<<20)
	fakecuda.SetLibraries(t, lib)
	fakecuda.SetNCCLTimeout(t, 2*time.Second)
	const ranks, m = 2, 1000
	err := runtimeview.RunLocal(testCtx(t), ranks, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		me := rt.Rank()
		dev := rt.MyResourceSet().Devices()[me] // a GPU of its own
		gpu := dev.Accel().(*cuda.Accel)
		put := func(x []float64) *resourceset.DeviceSlice[float64] { return putDev(t, ctx, dev, x) }
		get := func(s *resourceset.DeviceSlice[float64]) []float64 { return getDev(t, ctx, s) }
		vals := seqF64
		onGPUs := func(what string, f func()) {
			throughNCCL(t, lib, gpu, fmt.Sprintf("%s on rank %d", what, me), f)
			require.NoError(t, rt.Barrier(ctx)) // the counters of the next call start after every rank's
		}
		for root := range ranks {
			rootDev := rt.ResourceSet(root).Devices()[root]
			isRoot := me == root

			buf := put(vals(0, m))
			if isRoot {
				require.NoError(t, buf.CopyFrom(ctx, vals(100*root, m)))
			}
			onGPUs("BcastDevice", func() { require.NoError(t, resourceset.BcastDevice(ctx, rootDev, buf)) })
			require.Equal(t, vals(100*root, m), get(buf))

			var into *resourceset.DeviceSlice[float64]
			if isRoot {
				into = put(make([]float64, m))
			}
			onGPUs("ReduceDevice", func() {
				ok, err := resourceset.ReduceDevice(ctx, rootDev, buf, into, comm.Sum)
				require.NoError(t, err)
				require.Equal(t, isRoot, ok)
			})
			if isRoot {
				sum := vals(100*root, m)
				for i := range sum {
					sum[i] *= ranks
				}
				require.Equal(t, sum, get(into), "the sum of every rank's broadcast values")
			}
			buf.Free()
			if into != nil {
				into.Free()
			}

			// Rank k gathers k+2 values.
			mine := put(vals(10*me, me+2))
			into = nil
			if isRoot {
				into = put(make([]float64, 5))
			}
			onGPUs("GatherDevice", func() {
				ok, err := resourceset.GatherDevice(ctx, rootDev, mine, into)
				require.NoError(t, err)
				require.Equal(t, isRoot, ok)
			})
			if isRoot {
				require.Equal(t, append(vals(0, 2), vals(10, 3)...), get(into))
				into.Free()
			}
			mine.Free()

			var from *resourceset.DeviceSlice[float64]
			if isRoot {
				from = put(vals(1000*root, ranks*m))
			}
			part := put(make([]float64, m))
			onGPUs("ScatterDevice", func() { require.NoError(t, resourceset.ScatterDevice(ctx, rootDev, from, part)) })
			require.Equal(t, vals(1000*root+me*m, m), get(part))
			part.Free()
			if from != nil {
				from.Free()
			}
		}
		for _, lens := range [][]int{{3, 3}, {2, 3}} { // ncclAllGather; a broadcast from each rank
			mine := put(vals(10*me, lens[me]))
			all := put(make([]float64, lens[0]+lens[1]))
			onGPUs("AllGatherDevice", func() { require.NoError(t, runtimeview.AllGatherDevice(ctx, rt, mine, all)) })
			require.Equal(t, append(vals(0, lens[0]), vals(10, lens[1])...), get(all))
			mine.Free()
			all.Free()
		}
		return nil
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), runtimeview.WithCUDA(-1), runtimeview.WithCUDADriver(d))
	require.NoError(t, err)
}

// TestCUDAGatherNCCLWithoutP2P: with a NCCL older than 2.7 (no ncclSend
// or ncclRecv), GatherDevice and ScatterDevice between ranks with a GPU
// each stage through host memory, with the same values.
func TestCUDAGatherNCCLWithoutP2P(t *testing.T) {
	fakecuda.SetDelay(t, 0)
	lib := fakecuda.InstanceWithout(t, "ncclSend", "ncclRecv")
	fakecuda.Setenv(t, 2, 64<<20)
	d, err := cuda.OpenLibrary(lib)
	require.NoError(t, err)
	fakecuda.SetLibraries(t, lib)
	fakecuda.SetNCCLTimeout(t, 2*time.Second)
	const ranks, m = 2, 1000
	err = runtimeview.RunLocal(testCtx(t), ranks, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		me := rt.Rank()
		dev := rt.MyResourceSet().Devices()[me]
		root := rt.ResourceSet(0).Devices()[0]
		vals := make([]float64, ranks*m)
		for i := range vals {
			vals[i] = float64(i)
		}
		mine, err := resourceset.Alloc[float64](dev, m)
		require.NoError(t, err)
		defer mine.Free()
		var all *resourceset.DeviceSlice[float64]
		if me == 0 {
			all, err = resourceset.Alloc[float64](dev, ranks*m)
			require.NoError(t, err)
			defer all.Free()
			require.NoError(t, all.CopyFrom(ctx, vals))
		}
		require.NoError(t, resourceset.ScatterDevice(ctx, root, all, mine))
		got := make([]float64, m)
		require.NoError(t, mine.CopyTo(ctx, got))
		require.Equal(t, vals[me*m:(me+1)*m], got)
		if me == 0 {
			require.NoError(t, all.CopyFrom(ctx, make([]float64, ranks*m)))
		}
		ok, err := resourceset.GatherDevice(ctx, root, mine, all)
		require.NoError(t, err)
		require.Equal(t, me == 0, ok)
		if me == 0 {
			back := make([]float64, ranks*m)
			require.NoError(t, all.CopyTo(ctx, back))
			require.Equal(t, vals, back)
		}
		stats, err := fakecuda.Stats(lib)
		require.NoError(t, err)
		require.Zero(t, stats.NCCL, "nothing ran on NCCL")
		return nil
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), runtimeview.WithCUDA(-1), runtimeview.WithCUDADriver(d))
	require.NoError(t, err)
}

// TestCUDASchedulerWorkersPerGPU: the RuntimeView's GPUs, which its
// scheduler takes with scheduler.WithDevices, get the workers and SM
// partitions that WithCUDAWorkers and WithCUDAPartitions ask for, as
// the scheduler's own GPUs do.
func TestCUDASchedulerWorkersPerGPU(t *testing.T) {
	fakecuda.SetDelay(t, 0)
	d, _ := fakecuda.Open(t, 1, 64<<20)
	err := runtimeview.RunLocal(testCtx(t), 1, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		require.Len(t, rt.MyResourceSet().Devices(), 1)
		s, err := rt.Scheduler(ctx, scheduler.WithCUDAWorkers(2), scheduler.WithCUDAPartitions())
		require.NoError(t, err)
		var sms []int
		for _, w := range s.Local().Workers() {
			if w.Kind == scheduler.CUDAWorker {
				sms = append(sms, w.SMs)
			}
		}
		require.Equal(t, []int{8, 8}, sms, "two workers on the RuntimeView's GPU, each with half of its 16 SMs")
		return nil
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), runtimeview.WithCUDA(1), runtimeview.WithCUDADriver(d))
	require.NoError(t, err)
}

// throughNCCL runs f, a device collective named what, and checks that it
// made NCCL calls (the stand-in library lib counts them) and no staging
// copy through gpu's page-locked buffers.
func throughNCCL(t *testing.T, lib string, gpu *cuda.Accel, what string, f func()) {
	t.Helper()
	before, err := fakecuda.Stats(lib)
	require.NoError(t, err)
	pinned := gpu.PinnedCopies()
	f()
	after, err := fakecuda.Stats(lib)
	require.NoError(t, err)
	require.Greater(t, after.NCCL, before.NCCL, "%s: through NCCL", what)
	require.Equal(t, pinned, gpu.PinnedCopies(), "%s: no staging copies", what)
}
