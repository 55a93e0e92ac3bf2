package scheduler_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/scheduler"
)

// The scheduler as a holder of a shared device's memory, and the memory
// it needs there: what a resource set's allocation gets back from it,
// what a task does when others hold the device, and the Scratch
// buffers it counts.

// incAll adds 1 to every element of buffer 0.
var incAll = &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
	x := scheduler.VectorOf[float64](c, 0)
	for i := range x {
		x[i]++
	}
	return nil
}}

// writeBacks sums the scheduler's write-backs.
func writeBacks(s *scheduler.Scheduler) int64 {
	var n int64
	for _, x := range s.Transfers() {
		n += x.WriteBacks
	}
	return n
}

// quietHolder is another holder of a device's memory that keeps nothing
// it could give back; its own allocations ask the others without
// waiting, as another rank's scheduler does.
type quietHolder struct{}

func (quietHolder) Reclaim(int64, bool) (int64, string) { return 0, "" }

// TestReclaimWritesBackModified: an allocation by the device's Alloc (a
// resource set's, which may wait) on a device full of modified replicas
// that no task uses gets its room: the scheduler writes the least
// recently used back to RAM, then frees them, so the registered slice
// holds their results without WaitAll, and later tasks copy the data in
// again. Another holder's allocation, which may not wait, gets nothing
// written back.
func TestReclaimWritesBackModified(t *testing.T) {
	ctx := testCtx(t)
	const tile, tiles = 1024, 8 // elements: 8 KiB of float64 each
	const tileBytes = tile * 8
	dev, err := accel.NewSim(0, accel.SimConfig{Memory: tiles * tileBytes, Bandwidth: -1})
	require.NoError(t, err)
	defer dev.Close()
	s := newSchedBounded(t, scheduler.WithWorkers(1), scheduler.WithDevices(dev))
	dc := devOnly(t, s)
	data := make([]float64, tiles*tile)
	h, err := s.RegisterVector(data, scheduler.Named("data"))
	require.NoError(t, err)
	parts, err := h.Partition(scheduler.Blocks(tile, 1))
	require.NoError(t, err)
	for _, p := range parts {
		// One at a time, so that tile 0 is the least recently used.
		require.NoError(t, s.Submit(ctx, incAll, scheduler.RW(p[0]), scheduler.InContext(dc)))
		require.NoError(t, dc.WaitAll(ctx)) // a context's WaitAll moves no data
	}
	require.Equal(t, int64(tiles*tileBytes), dev.InUse(), "the tiles fill the device")
	require.Equal(t, 0.0, data[0], "the only valid copies are on the device")

	// Another holder allocating may not wait: nothing is written back,
	// and its error names the modified data.
	own, drop := dev.Hold(quietHolder{})
	_, err = own(3 * tileBytes)
	drop()
	require.ErrorIs(t, err, accel.ErrOutOfMemory)
	assert.Contains(t, err.Error(), fmt.Sprintf("%d in modified data", tiles*tileBytes))
	require.Zero(t, writeBacks(s), "an allocation that may not wait has nothing written back")

	// The device's own Alloc may wait: the three least recently used
	// tiles are written back, then given back.
	buf, err := dev.Alloc(3 * tileBytes)
	require.NoError(t, err, "modified replicas no task uses are written back and given back")
	require.Equal(t, int64(3), writeBacks(s))
	for i, v := range data {
		want := 0.0
		if i < 3*tile {
			want = 1 // written back
		}
		if v != want {
			t.Fatalf("element %d (tile %d) is %v in RAM, want %v", i, i/tile, v, want)
		}
	}
	dev.Free(buf)

	// All of it, when the scheduler uses none of it.
	all, err := dev.Alloc(tiles * tileBytes)
	require.NoError(t, err)
	for i, v := range data {
		require.Equal(t, 1.0, v, "element %d", i)
	}
	dev.Free(all)

	// The tasks go on from RAM's copies.
	for _, p := range parts {
		require.NoError(t, s.Submit(ctx, incAll, scheduler.RW(p[0]), scheduler.InContext(dc)))
	}
	require.NoError(t, h.Unpartition())
	require.NoError(t, s.WaitAll(ctx))
	for i, v := range data {
		require.Equal(t, 2.0, v, "element %d", i)
	}
}

// TestReclaimRacesTasks: allocations that have the scheduler write back
// and give back its replicas while tasks keep writing them lose no
// write: every task's increment is in the result (and the race detector
// sees the copies and the tasks ordered).
func TestReclaimRacesTasks(t *testing.T) {
	ctx := testCtx(t)
	const tile, tiles, rounds = 256, 8, 20
	const tileBytes = tile * 8
	dev, err := accel.NewSim(0, accel.SimConfig{Memory: tiles * tileBytes, Bandwidth: -1})
	require.NoError(t, err)
	defer dev.Close()
	s := newSchedBounded(t, scheduler.WithWorkers(1), scheduler.WithDevices(dev))
	dc := devOnly(t, s)
	data := make([]float64, tiles*tile)
	h, err := s.RegisterVector(data, scheduler.Named("data"))
	require.NoError(t, err)
	parts, err := h.Partition(scheduler.Blocks(tile, 1))
	require.NoError(t, err)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var got, refused int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			buf, err := dev.Alloc(2 * tileBytes)
			if err != nil {
				refused++ // the tiles running tasks use stay
				continue
			}
			got++
			dev.Free(buf)
		}
	}()
	for range rounds {
		for _, p := range parts {
			require.NoError(t, s.Submit(ctx, incAll, scheduler.RW(p[0]), scheduler.InContext(dc)))
		}
	}
	err = dc.WaitAll(ctx)
	close(stop)
	wg.Wait()
	require.NoError(t, err)
	t.Logf("%d allocations beside the tasks, %d refused, %d write-backs", got, refused, writeBacks(s))
	require.NoError(t, h.Unpartition())
	require.NoError(t, s.WaitAll(ctx))
	for i, v := range data {
		require.Equal(t, float64(rounds), v, "element %d", i)
	}
}

// freeingHolder stands for a user of the device whose memory goes while
// a task waits for room, without a word to the scheduler (another
// rank's tasks end, a resource set's buffer is freed): it frees buf the
// first time it is asked, which a scheduler's allocation does when it
// does not fit, and reports nothing given back.
type freeingHolder struct {
	dev  *accel.Sim
	once sync.Once
	buf  accel.Mem
}

func (f *freeingHolder) Reclaim(int64, bool) (int64, string) {
	f.once.Do(func() { f.dev.Free(f.buf) })
	return 0, ""
}

// TestDeviceFullOfOthersMemory: a task whose data do not fit beside
// memory the scheduler does not hold, while the scheduler holds nothing
// on the device, looks again for a while: it runs when the memory goes
// meanwhile, and fails with ErrDeviceMemory naming the sizes and who
// holds the device when it stays. A task that will fit once the
// scheduler's running tasks end waits for them.
func TestDeviceFullOfOthersMemory(t *testing.T) {
	const n = 1024 // elements: 8 KiB of float64
	const vecBytes = n * 8
	t.Run("freed meanwhile", func(t *testing.T) {
		ctx := testCtx(t)
		dev, err := accel.NewSim(0, accel.SimConfig{Memory: 4 * vecBytes, Bandwidth: -1})
		require.NoError(t, err)
		defer dev.Close()
		s := newSchedBounded(t, scheduler.WithWorkers(1), scheduler.WithDevices(dev))
		held, err := dev.Alloc(4 * vecBytes) // all of it, outside the scheduler
		require.NoError(t, err)
		f := &freeingHolder{dev: dev, buf: held}
		_, drop := dev.Hold(f)
		defer drop()
		x := make([]float64, n)
		h, err := s.RegisterVector(x, scheduler.Named("x"))
		require.NoError(t, err)
		require.NoError(t, s.Submit(ctx, incAll, scheduler.RW(h), scheduler.InContext(devOnly(t, s))))
		require.NoError(t, s.WaitAll(ctx), "the task looks again once the device's memory has gone")
		require.Equal(t, 1.0, x[0])
	})
	t.Run("held", func(t *testing.T) {
		ctx := testCtx(t)
		dev, err := accel.NewSim(0, accel.SimConfig{Memory: 4 * vecBytes, Bandwidth: -1})
		require.NoError(t, err)
		defer dev.Close()
		s := newSchedBounded(t, scheduler.WithWorkers(1), scheduler.WithDevices(dev))
		held, err := dev.Alloc(3 * vecBytes)
		require.NoError(t, err)
		defer dev.Free(held)
		x, y := make([]float64, n), make([]float64, n)
		hx, err := s.RegisterVector(x, scheduler.Named("x"))
		require.NoError(t, err)
		hy, err := s.RegisterVector(y, scheduler.Named("y"))
		require.NoError(t, err)
		require.NoError(t, s.Submit(ctx, incAll, scheduler.RW(hx), scheduler.R(hy), scheduler.InContext(devOnly(t, s))))
		err = s.WaitAll(ctx)
		require.ErrorIs(t, err, scheduler.ErrDeviceMemory)
		for _, w := range []string{
			`task "inc"'s data do not fit on sim0 beside memory this scheduler does not hold`,
			fmt.Sprintf("needs %d bytes on sim0 (the task %d in all", vecBytes, 2*vecBytes),
			fmt.Sprintf("which has %d bytes", 4*vecBytes),
			fmt.Sprintf("hold %d bytes", 3*vecBytes),
			"looked again for", "use smaller tiles or a larger device, or free memory there",
		} {
			assert.Contains(t, err.Error(), w)
		}
		require.Equal(t, 0.0, x[0], "the failed task changed nothing")
	})
	t.Run("running tasks", func(t *testing.T) {
		// Two workers on a device that fits three vectors: a task that
		// needs two waits while a running task holds two.
		ctx := testCtx(t)
		s := newSchedBounded(t, scheduler.WithWorkers(1), scheduler.WithPolicy("eager"),
			scheduler.WithSimDevices(scheduler.SimDevice{Memory: 3 * vecBytes, Workers: 2, Bandwidth: -1}))
		dc := devOnly(t, s)
		release := make(chan struct{})
		started := make(chan struct{})
		hold := &scheduler.Codelet{Name: "hold", CPU: func(*scheduler.Call) error {
			close(started)
			<-release
			return nil
		}}
		vec := func(name string) *scheduler.Handle {
			h, err := s.RegisterVector(make([]float64, n), scheduler.Named(name))
			require.NoError(t, err)
			return h
		}
		a, b, c, d := vec("a"), vec("b"), vec("c"), vec("d")
		require.NoError(t, s.Submit(ctx, hold, scheduler.RW(a), scheduler.RW(b), scheduler.InContext(dc)))
		<-started
		m := &eventMonitor{popName: "inc", popped: make(chan int, 1)}
		s.SetMonitor(m, 0)
		require.NoError(t, s.Submit(ctx, incAll, scheduler.RW(c), scheduler.R(d), scheduler.InContext(dc)))
		select {
		case <-m.popped: // the other worker took it; it waits for room
		case <-ctx.Done():
			t.Fatal("the second task was not taken")
		}
		close(release)
		require.NoError(t, s.WaitAll(ctx), "the task waits for the running task's end, not fails")
	})
}

// TestScratchCountedOnDevice: a Scratch access on a simulated device's
// worker gets device memory, counted in the node's use like a GPU's: a
// task whose data and scratch buffer cannot fit together is refused at
// once naming the scratch buffer, and one that fits after eviction has
// the least recently used replica written back to make room for it.
func TestScratchCountedOnDevice(t *testing.T) {
	const n = 1024 // elements: 8 KiB of float64
	const vecBytes = n * 8
	ctx := testCtx(t)
	dev, err := accel.NewSim(0, accel.SimConfig{Memory: 4 * vecBytes, Bandwidth: -1})
	require.NoError(t, err)
	defer dev.Close()
	s := newSchedBounded(t, scheduler.WithWorkers(1), scheduler.WithDevices(dev))
	dc := devOnly(t, s)
	data := make([][]float64, 4)
	hs := make([]*scheduler.Handle, 4)
	for i := range hs {
		data[i] = make([]float64, n)
		hs[i], err = s.RegisterVector(data[i], scheduler.Named(fmt.Sprintf("v%d", i)))
		require.NoError(t, err)
	}
	scratch, err := s.RegisterVector(make([]float64, n), scheduler.Named("tmp"))
	require.NoError(t, err)
	big, err := s.RegisterVector(make([]float64, 2*n), scheduler.Named("bigtmp"))
	require.NoError(t, err)
	var other [3]*scheduler.Handle // for the task that fails (its handles' later tasks would be canceled)
	for i := range other {
		other[i], err = s.RegisterVector(make([]float64, n), scheduler.Named(fmt.Sprintf("w%d", i)))
		require.NoError(t, err)
	}

	// Three vectors and a scratch buffer twice their size: 5 of 4.
	var inUse int64
	useScratch := &scheduler.Codelet{Name: "use-scratch", CPU: func(c *scheduler.Call) error {
		tmp := scheduler.VectorOf[float64](c, c.Len()-1)
		x := scheduler.VectorOf[float64](c, 0)
		for i := range x {
			tmp[i] = 1
			x[i] += tmp[i]
		}
		inUse = dev.InUse()
		return nil
	}}
	require.NoError(t, s.Submit(ctx, useScratch, scheduler.RW(other[0]), scheduler.R(other[1]), scheduler.R(other[2]), scheduler.Scratch(big), scheduler.InContext(dc)))
	err = dc.WaitAll(ctx)
	require.ErrorIs(t, err, scheduler.ErrDeviceMemory)
	require.Contains(t, err.Error(), fmt.Sprintf(`task "use-scratch" needs %d bytes of data on sim0, which has %d`, 5*vecBytes, 4*vecBytes))
	require.Contains(t, err.Error(), fmt.Sprintf(`a scratch buffer of handle "bigtmp": %d bytes`, 2*vecBytes))

	// The four vectors fill the device, modified there; then a task on
	// one of them with a scratch buffer has another written back.
	for _, h := range hs {
		require.NoError(t, s.Submit(ctx, incAll, scheduler.RW(h), scheduler.InContext(dc)))
		require.NoError(t, dc.WaitAll(ctx))
	}
	require.Equal(t, int64(4*vecBytes), dev.InUse())
	require.Zero(t, writeBacks(s))
	require.NoError(t, s.Submit(ctx, useScratch, scheduler.RW(hs[3]), scheduler.Scratch(scratch), scheduler.InContext(dc)))
	require.NoError(t, dc.WaitAll(ctx))
	require.Equal(t, int64(1), writeBacks(s), "a replica written back to make room for the scratch buffer")
	require.Equal(t, int64(4*vecBytes), inUse, "the scratch buffer is in the device's memory")
	require.Equal(t, 1.0, data[0][0], "v0, the least recently used, written back")
	require.NoError(t, s.WaitAll(ctx))
	require.Equal(t, 2.0, data[3][0])

	// The buffer went back to the node's cache when the task ended: the
	// device's Alloc gets all of it.
	all, err := dev.Alloc(4 * vecBytes)
	require.NoError(t, err)
	dev.Free(all)
}

// TestCUDAScratchCounted: a GPU task's Scratch buffer is counted in the
// GPU node's use and made room for like a replica: on a GPU full of the
// scheduler's modified replicas, the least recently used is written
// back for it (it was allocated beside the data layer's accounting,
// and failed with the driver's out-of-memory error).
func TestCUDAScratchCounted(t *testing.T) {
	ctx := testCtx(t)
	d, _ := fakeGPU(t, 64<<10)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d), scheduler.WithCUDAPipeline(1))
	k := gpuKernels(t, d)
	scale, _, _ := cudaCodelets(k)
	fill := loadKernel(t, d, fillPTX, "pz_fill_f64")
	addScratch := &scheduler.Codelet{Name: "add-scratch", CUDA: func(c *scheduler.CUDACall) error {
		n, _, _ := c.Dims(0)
		if err := launch1D(c, fill, n, c.Ptr(1), c.Arg.(float64), uint64(n)); err != nil {
			return err
		}
		return launch1D(c, k["pz_axpy_f64"], n, c.Ptr(0), 1.0, c.Ptr(1), uint64(n))
	}}
	gpu := devOnly(t, s)
	const vecs, n = 4, 2048 // 16 KiB each: four fill the GPU
	data := make([][]float64, vecs)
	hs := make([]*scheduler.Handle, vecs)
	for v := range data {
		data[v] = make([]float64, n)
		for i := range data[v] {
			data[v][i] = 1
		}
		var err error
		hs[v], err = s.RegisterVector(data[v], scheduler.Named(fmt.Sprintf("v%d", v)))
		require.NoError(t, err)
		require.NoError(t, s.Submit(ctx, scale, scheduler.RW(hs[v]), scheduler.WithArg(2.0), scheduler.InContext(gpu)))
		require.NoError(t, gpu.WaitAll(ctx))
	}
	require.Zero(t, writeBacks(s))
	tmp, err := s.RegisterVector(make([]float64, n), scheduler.Named("tmp"))
	require.NoError(t, err)
	require.NoError(t, s.Submit(ctx, addScratch, scheduler.RW(hs[3]), scheduler.Scratch(tmp), scheduler.WithArg(5.0), scheduler.InContext(gpu)))
	require.NoError(t, s.WaitAll(context.Background()))
	require.Equal(t, int64(1), writeBacks(s), "a replica written back to make room for the scratch buffer")
	for v := range data {
		want := 2.0
		if v == 3 {
			want = 7
		}
		for i, x := range data[v] {
			require.Equal(t, want, x, "vector %d element %d", v, i)
		}
	}
}

// TestScratchWaitsForWriteBack: a Scratch buffer that must evict a
// modified replica waits for that replica's write-back to end, on a link
// slow enough that the copy takes far longer than the looks again of a
// device full of others' memory (1, 2, 4 ... ms): it writes back one
// replica, not a second one while the first is still being copied out.
func TestScratchWaitsForWriteBack(t *testing.T) {
	const n = 1024 // elements: 8 KiB of float64
	const vecBytes = n * 8
	ctx := testCtx(t)
	// 8 KiB take 40 ms on the link.
	dev, err := accel.NewSim(0, accel.SimConfig{Memory: 4 * vecBytes, Bandwidth: vecBytes / 0.04})
	require.NoError(t, err)
	defer dev.Close()
	s := newSchedBounded(t, scheduler.WithWorkers(1), scheduler.WithDevices(dev))
	dc := devOnly(t, s)
	hs := make([]*scheduler.Handle, 4)
	for i := range hs {
		hs[i], err = s.RegisterVector(make([]float64, n), scheduler.Named(fmt.Sprintf("v%d", i)))
		require.NoError(t, err)
	}
	scratch, err := s.RegisterVector(make([]float64, n), scheduler.Named("tmp"))
	require.NoError(t, err)
	for _, h := range hs { // the four vectors fill the device, modified there
		require.NoError(t, s.Submit(ctx, incAll, scheduler.RW(h), scheduler.InContext(dc)))
		require.NoError(t, dc.WaitAll(ctx))
	}
	require.Zero(t, writeBacks(s))
	useScratch := &scheduler.Codelet{Name: "use-scratch", CPU: func(c *scheduler.Call) error {
		tmp, x := scheduler.VectorOf[float64](c, 1), scheduler.VectorOf[float64](c, 0)
		for i := range x {
			tmp[i] = 1
			x[i] += tmp[i]
		}
		return nil
	}}
	require.NoError(t, s.Submit(ctx, useScratch, scheduler.RW(hs[3]), scheduler.Scratch(scratch), scheduler.InContext(dc)))
	require.NoError(t, dc.WaitAll(ctx))
	require.Equal(t, int64(1), writeBacks(s), "replicas written back to make room for one scratch buffer")
}
