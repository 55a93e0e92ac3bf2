package runtimeview_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/resourceset"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler"
)

// simDevices are the devices the device checks open on every rank.
var simDevices = []accel.SimConfig{{Memory: 64 << 20}, {Memory: 32 << 20, Bandwidth: -1}}

// TestDevicesLocal runs the device checks on in-process ranks.
func TestDevicesLocal(t *testing.T) {
	for _, n := range []int{1, 3} {
		err := runtimeview.RunLocal(testCtx(t), n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
			checkDevices(t, ctx, rt)
			return nil
		}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), runtimeview.WithSimDevices(simDevices...))
		require.NoError(t, err)
	}
}

// checkDevices exercises the device components of every rank's resource
// set: the descriptions, buffers, every rooted device collective (on a
// non-zero root, over several staging chunks) and the all-to-all forms,
// a length mismatch, and the scheduler on the same devices. Every rank
// calls it.
func checkDevices(t *testing.T, ctx context.Context, rt *runtimeview.RuntimeView) {
	size, me := rt.Size(), rt.Rank()
	mine := rt.MyResourceSet().Devices()
	require.Len(t, mine, 2)
	assert.Equal(t, "sim0", mine[0].Name())
	assert.Equal(t, "sim", mine[1].Kind())
	assert.Equal(t, int64(32<<20), mine[1].MemoryBytes())
	assert.NotNil(t, mine[0].Accel())
	for r := range size {
		ds := rt.ResourceSet(r).Devices()
		require.Len(t, ds, 2, "rank %d's devices seen from rank %d", r, me)
		assert.Equal(t, r == me, ds[1].IsMine())
		if r != me {
			assert.Nil(t, ds[1].Accel())
			_, err := resourceset.Alloc[float64](ds[1], 4)
			assert.ErrorIs(t, err, resourceset.ErrInvalid)
		}
	}

	// Over several chunks of the staging path.
	n := 3*resourceset.StagingChunk/8 + 5
	root := rt.ResourceSet(size - 1).Devices()[1]
	onRoot := me == root.Rank()
	dev := mine[0]
	if onRoot {
		dev = mine[1]
	}
	buf, err := resourceset.Alloc[float64](dev, n)
	require.NoError(t, err)
	defer buf.Free()
	host := make([]float64, n)
	for i := range host {
		host[i] = float64(me*1000000 + i)
	}
	require.NoError(t, buf.CopyFrom(ctx, host))

	// Bcast from the last rank's second device.
	require.NoError(t, resourceset.BcastDevice(ctx, root, buf))
	got := make([]float64, n)
	require.NoError(t, buf.CopyTo(ctx, got))
	for _, i := range []int{0, n / 2, n - 1} {
		require.Equal(t, float64((size-1)*1000000+i), got[i], "element %d after BcastDevice on rank %d", i, me)
	}

	// Reduce: every rank adds its own values; the root gets the sums.
	require.NoError(t, buf.CopyFrom(ctx, host))
	var into *resourceset.DeviceSlice[float64]
	if onRoot {
		into, err = resourceset.Alloc[float64](root, n)
		require.NoError(t, err)
		defer into.Free()
	}
	ok, err := resourceset.ReduceDevice(ctx, root, buf, into, comm.Sum)
	require.NoError(t, err)
	assert.Equal(t, onRoot, ok)
	if onRoot {
		require.NoError(t, into.CopyTo(ctx, got))
		for _, i := range []int{0, n / 3, n - 1} {
			want := 0.0
			for r := range size {
				want += float64(r*1000000 + i)
			}
			require.Equal(t, want, got[i], "reduced element %d", i)
		}
	}

	// Gather lengths 1..size into rank 0's first device.
	groot := rt.ResourceSet(0).Devices()[0]
	part, err := resourceset.Alloc[int32](mine[0], me+1)
	require.NoError(t, err)
	defer part.Free()
	vals := make([]int32, me+1)
	for i := range vals {
		vals[i] = int32(me)
	}
	require.NoError(t, part.CopyFrom(ctx, vals))
	total := size * (size + 1) / 2
	var all *resourceset.DeviceSlice[int32]
	if me == 0 {
		all, err = resourceset.Alloc[int32](groot, total)
		require.NoError(t, err)
		defer all.Free()
	}
	ok, err = resourceset.GatherDevice(ctx, groot, part, all)
	require.NoError(t, err)
	assert.Equal(t, me == 0, ok)
	if me == 0 {
		g := make([]int32, total)
		require.NoError(t, all.CopyTo(ctx, g))
		off := 0
		for r := range size {
			for range r + 1 {
				require.Equal(t, int32(r), g[off])
				off++
			}
		}
	}

	// Scatter two elements to each rank from rank 0's first device.
	two, err := resourceset.Alloc[int32](mine[0], 2)
	require.NoError(t, err)
	defer two.Free()
	var from *resourceset.DeviceSlice[int32]
	if me == 0 {
		from, err = resourceset.Alloc[int32](groot, 2*size)
		require.NoError(t, err)
		defer from.Free()
		src := make([]int32, 2*size)
		for i := range src {
			src[i] = int32(10 * i)
		}
		require.NoError(t, from.CopyFrom(ctx, src))
	}
	require.NoError(t, resourceset.ScatterDevice(ctx, groot, from, two))
	pair := make([]int32, 2)
	require.NoError(t, two.CopyTo(ctx, pair))
	assert.Equal(t, []int32{int32(20 * me), int32(20*me + 10)}, pair)

	// AllReduce in place, AllGather.
	require.NoError(t, buf.CopyFrom(ctx, host))
	require.NoError(t, runtimeview.AllReduceDevice(ctx, rt, buf, comm.Max))
	require.NoError(t, buf.CopyTo(ctx, got))
	assert.Equal(t, float64((size-1)*1000000+n-1), got[n-1])
	everyone, err := resourceset.Alloc[int32](mine[1], total)
	require.NoError(t, err)
	defer everyone.Free()
	require.NoError(t, runtimeview.AllGatherDevice(ctx, rt, part, everyone))
	g := make([]int32, total)
	require.NoError(t, everyone.CopyTo(ctx, g))
	assert.Equal(t, int32(size-1), g[total-1])

	// A rank with another length: an error on every rank, not a hang.
	odd, err := resourceset.Alloc[float64](mine[0], 8+me%2)
	require.NoError(t, err)
	defer odd.Free()
	err = runtimeview.AllReduceDevice(ctx, rt, odd, comm.Sum)
	err2 := resourceset.BcastDevice(ctx, rt.ResourceSet(0).Devices()[0], odd)
	if size > 1 {
		assert.ErrorIs(t, err, comm.ErrMismatch)
		assert.ErrorIs(t, err2, comm.ErrMismatch)
	} else {
		assert.NoError(t, err)
		assert.NoError(t, err2)
	}

	// A nil slice on the last rank: that rank's own error, and one that
	// names it on every other rank (it used to return before the others'
	// agreement step: they paired the call with its next one, or waited).
	// The ranks stay in step: the next collective works everywhere.
	if size > 1 {
		var s *resourceset.DeviceSlice[float64]
		if me != size-1 {
			s = odd
		}
		err := resourceset.BcastDevice(ctx, rt.ResourceSet(0).Devices()[0], s)
		if me == size-1 {
			assert.ErrorIs(t, err, resourceset.ErrInvalid)
		} else {
			assert.ErrorIs(t, err, comm.ErrMismatch)
			assert.ErrorContains(t, err, fmt.Sprintf("BcastDevice: rank %d's arguments are invalid", size-1))
		}
		require.NoError(t, runtimeview.AllReduceDevice(ctx, rt, buf, comm.Max))
	}

	// The rank's scheduler computes on the same devices.
	d, err := rt.Scheduler(ctx)
	require.NoError(t, err)
	s := d.Local()
	assert.Equal(t, []string{"ram", "sim0", "sim1"}, s.MemoryNodes())
	v := make([]float64, 1024)
	h, err := s.RegisterVector(v)
	require.NoError(t, err)
	var devIDs []int
	for _, w := range s.Workers() {
		if w.Kind == scheduler.SimWorker {
			devIDs = append(devIDs, w.ID)
		}
	}
	require.Len(t, devIDs, 2)
	c, err := s.NewContext("devices", scheduler.ContextWorkers(devIDs...))
	require.NoError(t, err)
	inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
		x := scheduler.VectorOf[float64](c, 0)
		for i := range x {
			x[i]++
		}
		return nil
	}}
	for range 4 {
		require.NoError(t, s.Submit(ctx, inc, scheduler.RW(h), scheduler.InContext(c)))
	}
	require.NoError(t, s.WaitAll(ctx))
	assert.Equal(t, 4.0, v[1023])
	require.NoError(t, rt.Barrier(ctx))
}

// TestSharedDevicesBcastWithin: in-process ranks sharing one simulated
// device (a node's GPU) broadcast between their buffers by copies within
// the device, none through host memory; with separate devices the same
// call stages.
func TestSharedDevicesBcastWithin(t *testing.T) {
	const n = 100000
	for _, shared := range []bool{true, false} {
		opt := runtimeview.WithSimDevices(accel.SimConfig{Memory: 16 << 20})
		if shared {
			opt = runtimeview.WithSharedSimDevices(accel.SimConfig{Memory: 16 << 20})
		}
		err := runtimeview.RunLocal(testCtx(t), 3, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
			dev := rt.MyResourceSet().Devices()[0]
			sim := dev.Accel().(*accel.Sim)
			buf, err := resourceset.Alloc[int32](dev, n)
			require.NoError(t, err)
			defer buf.Free()
			host := make([]int32, n)
			for i := range host {
				host[i] = int32(rt.Rank()*n + i)
			}
			require.NoError(t, buf.CopyFrom(ctx, host))
			require.NoError(t, rt.Barrier(ctx))
			in0, out0, within0 := sim.Copies()
			require.NoError(t, resourceset.BcastDevice(ctx, rt.ResourceSet(1).Devices()[0], buf))
			require.NoError(t, rt.Barrier(ctx))
			in1, out1, within1 := sim.Copies()
			if shared {
				assert.Equal(t, int64(2), within1-within0, "one copy within the device per receiving rank")
				assert.Equal(t, in0, in1)
				assert.Equal(t, out0, out1)
			} else {
				assert.Equal(t, within0, within1)
				assert.Positive(t, in1-in0+out1-out0)
			}
			require.NoError(t, rt.Barrier(ctx)) // every rank has read the counts
			require.NoError(t, buf.CopyTo(ctx, host))
			assert.Equal(t, int32(n+n-1), host[n-1], "rank %d", rt.Rank())

			// Gather and Scatter on rank 2's device: the same paths.
			groot := rt.ResourceSet(2).Devices()[0]
			part, err := resourceset.Alloc[int32](dev, 2)
			require.NoError(t, err)
			defer part.Free()
			require.NoError(t, part.CopyFrom(ctx, []int32{int32(rt.Rank()), int32(10 * rt.Rank())}))
			var all *resourceset.DeviceSlice[int32]
			if rt.Rank() == 2 {
				all, err = resourceset.Alloc[int32](dev, 6)
				require.NoError(t, err)
				defer all.Free()
			}
			require.NoError(t, rt.Barrier(ctx))
			_, _, within0 = sim.Copies()
			ok, err := resourceset.GatherDevice(ctx, groot, part, all)
			require.NoError(t, err)
			assert.Equal(t, rt.Rank() == 2, ok)
			require.NoError(t, rt.Barrier(ctx))
			_, _, within1 = sim.Copies()
			require.NoError(t, rt.Barrier(ctx))
			if shared {
				assert.Equal(t, int64(3), within1-within0, "the root copies each part within")
			}
			if rt.Rank() == 2 {
				g := make([]int32, 6)
				require.NoError(t, all.CopyTo(ctx, g))
				assert.Equal(t, []int32{0, 0, 1, 10, 2, 20}, g)
				// Scatter it back, reversed.
				require.NoError(t, all.CopyFrom(ctx, []int32{7, 70, 8, 80, 9, 90}))
			}
			require.NoError(t, resourceset.ScatterDevice(ctx, groot, all, part))
			got := make([]int32, 2)
			require.NoError(t, part.CopyTo(ctx, got))
			assert.Equal(t, []int32{int32(7 + rt.Rank()), int32(70 + 10*rt.Rank())}, got)

			// AllGather: every rank gets every part.
			every, err := resourceset.Alloc[int32](dev, 6)
			require.NoError(t, err)
			defer every.Free()
			require.NoError(t, rt.Barrier(ctx))
			_, _, within0 = sim.Copies()
			require.NoError(t, runtimeview.AllGatherDevice(ctx, rt, part, every))
			require.NoError(t, rt.Barrier(ctx))
			_, _, within1 = sim.Copies()
			require.NoError(t, rt.Barrier(ctx))
			if shared {
				assert.Equal(t, int64(9), within1-within0, "each rank copies each part within")
			}
			g := make([]int32, 6)
			require.NoError(t, every.CopyTo(ctx, g))
			assert.Equal(t, []int32{7, 70, 8, 80, 9, 90}, g)
			return nil
		}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), opt)
		require.NoError(t, err, "shared=%v", shared)
	}
}

// TestSimDevicesFromEnv: PZ_NSIM and PZ_SIM_MEMORY open devices on every
// rank; bad values are an option error naming the variable.
func TestSimDevicesFromEnv(t *testing.T) {
	env := func(m map[string]string) runtimeview.Option {
		return runtimeview.WithGetenv(func(k string) string { return m[k] })
	}
	err := runtimeview.RunLocal(testCtx(t), 2, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		ds := rt.ResourceSet(1).Devices()
		require.Len(t, ds, 3)
		assert.Equal(t, int64(2<<20), ds[2].MemoryBytes())
		return nil
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), env(map[string]string{"PZ_NSIM": "3", "PZ_SIM_MEMORY": "2MiB"}))
	require.NoError(t, err)
	err = runtimeview.RunLocal(testCtx(t), 2, func(context.Context, *runtimeview.RuntimeView) error { return nil },
		runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), env(map[string]string{"PZ_NSIM": "1", "PZ_SIM_MEMORY": "lots"}))
	require.ErrorIs(t, err, runtimeview.ErrOption)
	require.ErrorIs(t, err, scheduler.ErrBadOption)
	require.EqualError(t, err, `ranks 0-1: runtimeview: invalid option: PZ_SIM_MEMORY="lots" is not a size (bytes, or 64MiB, 2GiB...)`)
}

// putDev returns a slice on dev holding x.
func putDev(t *testing.T, ctx context.Context, dev *resourceset.Device, x []float64) *resourceset.DeviceSlice[float64] {
	t.Helper()
	s, err := resourceset.Alloc[float64](dev, len(x))
	require.NoError(t, err)
	require.NoError(t, s.CopyFrom(ctx, x))
	return s
}

// getDev returns what s holds.
func getDev(t *testing.T, ctx context.Context, s *resourceset.DeviceSlice[float64]) []float64 {
	t.Helper()
	x := make([]float64, s.Len())
	require.NoError(t, s.CopyTo(ctx, x))
	return x
}

// seqF64 returns n values from base on.
func seqF64(base, n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(base + i)
	}
	return x
}

// TestSchedulerGivesDeviceMemoryBack: the rank's scheduler and its
// resource set share a device; a resource-set buffer that does not fit
// beside what the scheduler keeps there (clean replicas, and after
// Unregister its cached allocations) gets that memory back.
func TestSchedulerGivesDeviceMemoryBack(t *testing.T) {
	const tile = 4096 // float64: 32 KiB
	err := runtimeview.RunLocal(testCtx(t), 1, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		dev := rt.MyResourceSet().Devices()[0]
		d, err := rt.Scheduler(ctx)
		require.NoError(t, err)
		s := d.Local()
		var dw []int
		for _, w := range s.Workers() {
			if w.Kind == scheduler.SimWorker {
				dw = append(dw, w.ID)
			}
		}
		dc, err := s.NewContext("dev", scheduler.ContextWorkers(dw...))
		require.NoError(t, err)
		h, err := s.RegisterVector(make([]float64, 8*tile))
		require.NoError(t, err)
		tiles, err := h.Partition(scheduler.Blocks(tile, 1))
		require.NoError(t, err)
		inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
			scheduler.VectorOf[float64](c, 0)[0]++
			return nil
		}}
		for _, tl := range tiles {
			require.NoError(t, s.Submit(ctx, inc, scheduler.RW(tl[0]), scheduler.InContext(dc)))
		}
		require.NoError(t, s.WaitAll(ctx))
		buf, err := resourceset.Alloc[float64](dev, 3*tile)
		require.NoError(t, err, "beside the scheduler's clean replicas")
		buf.Free()
		require.NoError(t, h.Unpartition())
		_, err = h.Unregister(ctx)
		require.NoError(t, err)
		buf, err = resourceset.Alloc[float64](dev, 8*tile)
		require.NoError(t, err, "the whole device after Unregister")
		buf.Free()
		return nil
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), runtimeview.WithSimDevices(accel.SimConfig{Memory: 8 * tile * 8}))
	require.NoError(t, err)
}
