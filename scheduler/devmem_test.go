package scheduler_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/internal/fakecuda"
	"github.com/pzgo/pz/scheduler"
)

// TestDeviceMemoryGivenBack: a device the scheduler shares with another
// user (a resource set's buffers) gets back what the scheduler keeps
// there without needing it - its cached allocations and clean replicas -
// when the other user runs short; what it cannot give back (data that
// running tasks use) is named in the out-of-memory error.
func TestDeviceMemoryGivenBack(t *testing.T) {
	ctx := testCtx(t)
	const tile = 4096 // elements: 32 KiB of float64
	dev, err := accel.NewSim(0, accel.SimConfig{Memory: 8 * tile * 8, Bandwidth: -1})
	require.NoError(t, err)
	defer dev.Close()
	s := newSchedBounded(t, scheduler.WithWorkers(1), scheduler.WithDevices(dev))
	dc := devOnly(t, s)
	inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
		for i, v := range scheduler.VectorOf[float64](c, 0) {
			scheduler.VectorOf[float64](c, 0)[i] = v + 1
		}
		return nil
	}}
	data := make([]float64, 8*tile)
	h, err := s.RegisterVector(data, scheduler.Named("data"))
	require.NoError(t, err)
	tiles, err := h.Partition(scheduler.Blocks(tile, 1))
	require.NoError(t, err)
	for _, tl := range tiles {
		require.NoError(t, s.Submit(ctx, inc, scheduler.RW(tl[0]), scheduler.InContext(dc)))
	}
	require.NoError(t, s.WaitAll(ctx)) // the tiles stay on the device, clean
	require.Equal(t, int64(8*tile*8), dev.InUse(), "the scheduler fills the device")

	// Clean replicas are given back.
	buf, err := dev.Alloc(3 * tile * 8)
	require.NoError(t, err, "a clean replica the scheduler could evict is given back")
	dev.Free(buf)

	// Data that a running task uses are not; the error says who holds
	// the memory and what frees it.
	release := make(chan struct{})
	started := make(chan struct{})
	hold := &scheduler.Codelet{Name: "hold", CPU: func(c *scheduler.Call) error {
		close(started)
		<-release
		return nil
	}}
	args := []scheduler.Arg{scheduler.InContext(dc)}
	for _, tl := range tiles {
		args = append(args, scheduler.R(tl[0]))
	}
	require.NoError(t, s.Submit(ctx, hold, args...))
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the holding task did not start")
	}
	_, err = dev.Alloc(tile * 8)
	require.ErrorIs(t, err, accel.ErrOutOfMemory)
	for _, w := range []string{"sim0", "scheduler", "262144 bytes", "running tasks or copies use", "frees them when they end"} {
		assert.Contains(t, err.Error(), w)
	}
	close(release)
	require.NoError(t, s.WaitAll(ctx))

	// After Unregister the cache is given back, all of it.
	require.NoError(t, h.Unpartition())
	_, err = h.Unregister(ctx)
	require.NoError(t, err)
	all, err := dev.Alloc(8 * tile * 8)
	require.NoError(t, err, "an unregistered handle's cached device memory is given back")
	dev.Free(all)

	// And the scheduler goes on beside what the other user holds.
	buf, err = dev.Alloc(3 * tile * 8)
	require.NoError(t, err)
	defer dev.Free(buf)
	h2, err := s.RegisterVector(make([]float64, 8*tile), scheduler.Named("data2"))
	require.NoError(t, err)
	tiles2, err := h2.Partition(scheduler.Blocks(tile, 1))
	require.NoError(t, err)
	for range 2 {
		for _, tl := range tiles2 {
			require.NoError(t, s.Submit(ctx, inc, scheduler.RW(tl[0]), scheduler.InContext(dc)))
		}
	}
	require.NoError(t, s.WaitAll(ctx))
	require.NoError(t, h2.Unpartition())
	x, err := h2.Unregister(ctx)
	require.NoError(t, err)
	for i, v := range x.([]float64) {
		if v != 2 {
			t.Fatalf("element %d is %v, want 2", i, v)
		}
	}
}

// tiledGemm submits C += A·B on nt×nt tiles of b×b elements to context
// c and returns the result and the sequential reference.
func tiledGemm(t *testing.T, s *scheduler.Scheduler, c *scheduler.Context, nt, b int) (got, want []float64) {
	t.Helper()
	ctx := testCtx(t)
	n := nt * b
	r := rand.New(rand.NewPCG(1, 2))
	a, bm, cm := make([]float64, n*n), make([]float64, n*n), make([]float64, n*n)
	for i := range a {
		a[i], bm[i], cm[i] = float64(r.IntN(8)), float64(r.IntN(8)), float64(r.IntN(8))
	}
	want = append([]float64(nil), cm...)
	for i := range n {
		for j := range n {
			for k := range n {
				want[i*n+j] += a[i*n+k] * bm[k*n+j]
			}
		}
	}
	var hs [3]*scheduler.Handle
	var ts [3][][]*scheduler.Handle
	for i, m := range [3][]float64{a, bm, cm} {
		h, err := s.RegisterMatrix(m, n, n, scheduler.Named(string(rune('A'+i))))
		require.NoError(t, err)
		hs[i] = h
		ts[i], err = h.Partition(scheduler.Blocks(b, b))
		require.NoError(t, err)
	}
	cl := &scheduler.Codelet{Name: "gemm", CPU: func(c *scheduler.Call) error {
		x, y, z := scheduler.MatrixOf[float64](c, 0), scheduler.MatrixOf[float64](c, 1), scheduler.MatrixOf[float64](c, 2)
		for i := range z.Rows {
			for j := range z.Cols {
				sum := z.At(i, j)
				for k := range x.Cols {
					sum += x.At(i, k) * y.At(k, j)
				}
				z.Set(i, j, sum)
			}
		}
		return nil
	}}
	for i := range nt {
		for j := range nt {
			for k := range nt {
				require.NoError(t, s.Submit(ctx, cl, scheduler.R(ts[0][i][k]), scheduler.R(ts[1][k][j]), scheduler.RW(ts[2][i][j]), scheduler.InContext(c)))
			}
		}
	}
	for _, h := range hs {
		require.NoError(t, h.Unpartition())
	}
	require.NoError(t, s.WaitAll(ctx))
	return cm, want
}

// copiesAndEvictions sums the copies into devices and the evictions.
func copiesAndEvictions(s *scheduler.Scheduler) (copies, evictions int64) {
	for _, x := range s.Transfers() {
		if x.From == scheduler.RAM && x.To != scheduler.RAM {
			copies += x.Count
		}
		evictions += x.Evictions
	}
	return copies, evictions
}

// TestTightDeviceNoThrash: several workers on a device whose memory fits
// about one task's data take turns; they do not evict each other's
// inputs while each waits for room for the rest (which copied the same
// tiles in tens of thousands of times for 64 tasks).
func TestTightDeviceNoThrash(t *testing.T) {
	for _, policy := range []string{"dmda", "eager"} {
		t.Run(policy, func(t *testing.T) {
			const nt, b = 4, 16
			tileBytes := int64(b * b * 8)
			s := newSchedBounded(t, scheduler.WithWorkers(1), scheduler.WithPolicy(policy),
				scheduler.WithSimDevices(scheduler.SimDevice{Memory: 3*tileBytes + tileBytes/2, Workers: 3}))
			got, want := tiledGemm(t, s, devOnly(t, s), nt, b)
			require.Equal(t, want, got)
			copies, evictions := copiesAndEvictions(s)
			tasks := int64(nt * nt * nt)
			// Each task copies in at most its three tiles; a few more for
			// the copies a prefetch starts and an eviction undoes. The
			// thrashing this guards against made hundreds per task.
			bound := 4 * tasks
			t.Logf("%d tasks: %d copies in, %d evictions", tasks, copies, evictions)
			assert.LessOrEqual(t, copies, bound, "copies into the device")
			assert.LessOrEqual(t, evictions, bound, "evictions")
		})
	}
}

// TestTightDeviceWorkersComplete: workers that each hold part of a full
// device's memory while waiting for the rest would wait for each other
// forever; on a device that fits exactly one task's data, with more
// workers than that, every task completes, with the right result.
func TestTightDeviceWorkersComplete(t *testing.T) {
	for _, workers := range []int{2, 4} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			const nt, b = 3, 8
			tileBytes := int64(b * b * 8)
			s := newSchedBounded(t, scheduler.WithWorkers(1),
				scheduler.WithSimDevices(scheduler.SimDevice{Memory: 3 * tileBytes, Workers: workers, Latency: time.Microsecond}))
			done := make(chan struct{})
			var got, want []float64
			go func() {
				defer close(done)
				got, want = tiledGemm(t, s, devOnly(t, s), nt, b)
			}()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("tasks still waiting for device memory after 20s")
			}
			require.Equal(t, want, got)
		})
	}
}

// TestCUDAWorkersTightGPU: GPU workers with tasks in flight take turns
// on a GPU that fits one task's data. A worker that waits for another's
// task to get room first completes its own tasks in flight, whose data
// may be that room; waiting first, the two would wait for each other.
func TestCUDAWorkersTightGPU(t *testing.T) {
	ctx := testCtx(t)
	fakecuda.SetDelay(t, 2*time.Millisecond) // tasks are still in flight when the next need room
	d, _ := fakeGPU(t, 64<<10)
	s := newSchedBounded(t, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d),
		scheduler.WithCUDAWorkers(3), scheduler.WithCUDAPipeline(2))
	scale, _, _ := cudaCodelets(gpuKernels(t, d))
	const vecs, n = 8, 5000 // 40 kB each: one fits on the 64 KiB GPU
	check := scaleEachTwice(ctx, t, s, scale, vecs, n)
	done := make(chan error, 1)
	go func() { done <- s.WaitAll(ctx) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("tasks still waiting for GPU memory after 20s")
	}
	check()
}
