package scheduler_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
	"github.com/pzgo/pz/scheduler"
)

// waitPTX names the stand-in's pz_wait_u32 kernel (a stream waits until
// a host word is set); only the stand-in driver runs it.
const waitPTX = `
.version 7.0
.target sm_52
.address_size 64
.visible .entry pz_wait_u32(.param .u64 flag) { ret; }
`

// hostFlag returns a word of page-locked host memory that pz_wait_u32
// waits on, its address as the kernel's argument, and a function that
// sets it.
func hostFlag(t *testing.T, d *cuda.Driver) (addr uint64, set func()) {
	t.Helper()
	ctx := testCtx(t)
	c, err := d.NewContext(ctx, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	b, err := c.AllocHost(ctx, 4)
	require.NoError(t, err)
	clear(b) // page-locked memory comes as it was left: a freed flag held 1
	p := (*uint32)(unsafe.Pointer(&b[0]))
	t.Cleanup(func() {
		atomic.StoreUint32(p, 1) // a stream still waiting ends
		_ = c.FreeHost(ctx, b)
	})
	return uint64(uintptr(unsafe.Pointer(p))), func() { atomic.StoreUint32(p, 1) }
}

// TestCUDAPipeline: a GPU worker with two tasks in flight takes the
// second task while the first one's work still runs. The first task's
// kernel waits for a host word that only the second task's
// implementation sets: a worker that waited for each task's stream
// before the next would never run the second, and WaitAll would time
// out.
func TestCUDAPipeline(t *testing.T) {
	ctx := testCtx(t)
	d, lib := fakeGPU(t, 64<<20)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d),
		scheduler.WithCUDAPipeline(2), scheduler.WithStats(true))
	k := gpuKernels(t, d)
	wait := loadKernel(t, d, waitPTX, "pz_wait_u32")
	addr, set := hostFlag(t, d)

	launched := make(chan struct{})
	first := &scheduler.Codelet{Name: "first", CUDA: func(c *scheduler.CUDACall) error {
		if err := c.Context.Launch(ctx, wait, cuda.Dim3{X: 1}, cuda.Dim3{X: 1}, 0, c.Stream, addr); err != nil {
			return err
		}
		close(launched)
		n, _, _ := c.Dims(0)
		return launch1D(c, k["pz_scale_f64"], n, c.Ptr(0), 2.0, uint64(n))
	}}
	second := &scheduler.Codelet{Name: "second", CUDA: func(c *scheduler.CUDACall) error {
		set()
		n, _, _ := c.Dims(0)
		return launch1D(c, k["pz_scale_f64"], n, c.Ptr(0), 3.0, uint64(n))
	}}
	x, y := []float64{1, 2, 3}, []float64{4, 5, 6}
	hx, err := s.RegisterVector(x)
	require.NoError(t, err)
	hy, err := s.RegisterVector(y)
	require.NoError(t, err)
	require.NoError(t, s.Submit(ctx, first, scheduler.RW(hx)))
	select {
	case <-launched:
	case <-ctx.Done():
		t.Fatal("the first task never ran")
	}
	require.NoError(t, s.Submit(ctx, second, scheduler.RW(hy)))
	require.NoError(t, s.WaitAll(ctx), "the second task runs while the first waits for it on the GPU")
	require.Equal(t, []float64{2, 4, 6}, x)
	require.Equal(t, []float64{12, 15, 18}, y)

	// Both tasks are in the trace, on the GPU worker (worker 1).
	var names []string
	for _, tt := range s.TracedTasks() {
		require.Equal(t, []int{1}, tt.Workers, tt.Name)
		require.LessOrEqual(t, tt.Start, tt.End, tt.Name)
		names = append(names, tt.Name)
	}
	require.ElementsMatch(t, []string{"first", "second"}, names)
	require.NoError(t, s.Close())
	st, err := fakecuda.Stats(lib)
	require.NoError(t, err)
	require.Zero(t, st.InvalidContext)
}

// loadKernel loads ptx on GPU 0 of d (its primary context) and returns
// its function name.
func loadKernel(t *testing.T, d *cuda.Driver, ptx, name string) *cuda.Function {
	t.Helper()
	ctx := testCtx(t)
	c, err := d.NewContext(ctx, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	m, err := c.LoadPTX(ctx, ptx)
	require.NoError(t, err)
	f, err := m.Function(ctx, name)
	require.NoError(t, err)
	return f
}

// TestCUDAPipelineRoom: with a task in flight whose data fill most of
// the GPU, the worker's next task needs room that only the first task's
// end frees. The worker completes its tasks in flight before it waits
// for room; waiting first, it would wait for itself.
func TestCUDAPipelineRoom(t *testing.T) {
	ctx := testCtx(t)
	fakecuda.SetDelay(t, 5*time.Millisecond) // the first task is still in flight when the next one needs room
	d, _ := fakeGPU(t, 64<<10)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d), scheduler.WithCUDAPipeline(3))
	scale, _, _ := cudaCodelets(gpuKernels(t, d))
	const vecs, n = 4, 5000 // 40 kB each: one fits on the 64 KiB GPU
	check := scaleEachTwice(ctx, t, s, scale, vecs, n)
	require.NoError(t, s.WaitAll(ctx))
	check()
}

// TestCUDAPipelineOptions: the depth comes from WithCUDAPipeline or
// PZ_CUDA_PIPELINE; bad values are refused; a depth of one runs tasks
// one after another correctly.
func TestCUDAPipelineOptions(t *testing.T) {
	d, _ := fakeGPU(t, 64<<20)
	for _, bad := range []string{"0", "-1", "two"} {
		_, err := scheduler.New(testCtx(t), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d),
			scheduler.WithGetenv(func(k string) string {
				if k == "PZ_CUDA_PIPELINE" {
					return bad
				}
				return ""
			}))
		require.ErrorIs(t, err, scheduler.ErrBadOption, "PZ_CUDA_PIPELINE=%s", bad)
		require.ErrorContains(t, err, "PZ_CUDA_PIPELINE")
	}
	for _, bad := range []int{0, -2} {
		_, err := scheduler.New(testCtx(t), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d), scheduler.WithCUDAPipeline(bad))
		require.ErrorIs(t, err, scheduler.ErrBadOption, "WithCUDAPipeline(%d)", bad)
	}
	for _, depth := range []int{1, 4} {
		ctx := testCtx(t)
		s := newSched(t, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d), scheduler.WithCUDAPipeline(depth))
		scale, axpy, inc := cudaCodelets(gpuKernels(t, d))
		x, y := []float64{1, 2}, []float64{10, 20}
		hx, err := s.RegisterVector(x)
		require.NoError(t, err)
		hy, err := s.RegisterVector(y)
		require.NoError(t, err)
		for range 5 {
			require.NoError(t, s.Submit(ctx, scale, scheduler.RW(hx), scheduler.WithArg(2.0)))
			require.NoError(t, s.Submit(ctx, inc, scheduler.RW(hx)))
			require.NoError(t, s.Submit(ctx, axpy, scheduler.RW(hy), scheduler.WithArg(1.0), scheduler.R(hx)))
		}
		require.NoError(t, s.WaitAll(ctx))
		wx, wy := []float64{1, 2}, []float64{10, 20}
		for range 5 {
			for i := range wx {
				wx[i] = 2*wx[i] + 1
				wy[i] += wx[i]
			}
		}
		require.Equal(t, wx, x, "depth %d", depth)
		require.Equal(t, wy, y, "depth %d", depth)
		require.NoError(t, s.Close())
	}
}

// TestCUDAPinHost: data registered on memory PinHost page-locked move
// through the GPU's copy engines asynchronously (the Accel counts them),
// other data as before; the pins end at UnpinHost or Close.
func TestCUDAPinHost(t *testing.T) {
	ctx := testCtx(t)
	d, _ := fakeGPU(t, 64<<20)
	a, err := d.NewAccel(ctx, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithDevices(a))
	scale, _, _ := cudaCodelets(gpuKernels(t, d))

	x, y := make([]float64, 1000), make([]float64, 1000)
	for i := range x {
		x[i], y[i] = float64(i), float64(2*i)
	}
	require.NoError(t, scheduler.PinHost(s, x))
	require.ErrorIs(t, scheduler.PinHost(s, x), scheduler.ErrBadData, "pinned twice")
	require.ErrorIs(t, scheduler.PinHost(s, []float64{}), scheduler.ErrBadData)
	hx, err := s.RegisterVector(x)
	require.NoError(t, err)
	hy, err := s.RegisterVector(y)
	require.NoError(t, err)

	require.NoError(t, s.Submit(ctx, scale, scheduler.RW(hx), scheduler.WithArg(3.0)))
	require.NoError(t, s.WaitAll(ctx))
	pinned := a.PinnedCopies()
	require.GreaterOrEqual(t, pinned, int64(2), "x in and back out, asynchronously")
	require.NoError(t, s.Submit(ctx, scale, scheduler.RW(hy), scheduler.WithArg(3.0)))
	require.NoError(t, s.WaitAll(ctx))
	require.Equal(t, pinned, a.PinnedCopies(), "y is pageable")
	for i := range x {
		require.Equal(t, float64(3*i), x[i])
		require.Equal(t, float64(6*i), y[i])
	}

	// UnpinHost, then x is pageable again; y pinned until Close.
	require.NoError(t, scheduler.UnpinHost(s, x))
	require.NoError(t, scheduler.UnpinHost(s, x), "not pinned: nothing to do")
	require.NoError(t, scheduler.PinHost(s, y))
	require.NoError(t, s.Close())
	c, err := d.NewContext(ctx, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	for _, v := range [][]float64{x, y} {
		b := cuda.Bytes(v)
		require.NoError(t, c.HostRegister(ctx, b), "the scheduler left it registered")
		require.NoError(t, c.HostUnregister(ctx, b))
	}

	// A scheduler without GPUs pins nothing, without an error.
	cpu := newSched(t, scheduler.WithWorkers(1))
	require.NoError(t, scheduler.PinHost(cpu, x))
	require.NoError(t, scheduler.UnpinHost(cpu, x))
}

// TestCUDABusPinned: a GPU's link is calibrated from its page-locked
// staging buffers (the copies count as pinned ones) and saved as such.
func TestCUDABusPinned(t *testing.T) {
	ctx := testCtx(t)
	d, _ := fakeGPU(t, 64<<20)
	a, err := d.NewAccel(ctx, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	dir := t.TempDir()
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithDevices(a), scheduler.WithPerfModelDir(dir))
	require.Len(t, s.Bus(), 2)
	// Each way: up to 3 copies of 8 bytes, a probe, up to 3 of the large
	// size (fewer once the measurement's time budget has passed).
	in, out, _ := a.Copies()
	require.GreaterOrEqual(t, in, int64(3))
	require.GreaterOrEqual(t, out, int64(3))
	require.Equal(t, in+out, a.PinnedCopies(), "every copy from pinned memory")
	files, err := filepath.Glob(filepath.Join(dir, "bus.cuda-*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	require.Contains(t, string(b), `"pinned": true`)
}

// fillPTX names the stand-in's pz_fill_f64 kernel (x[i] = v).
const fillPTX = `
.version 7.0
.target sm_52
.address_size 64
.visible .entry pz_fill_f64(.param .u64 x, .param .f64 v, .param .u64 n) { ret; }
`

// TestCUDAScratch: a GPU task's Scratch buffer is GPU memory of the
// handle's shape, one per task in flight: tasks that fill it with their
// own value and add it to their vector, two at a time on one worker
// (the stand-in delays each operation, so a shared buffer would mix
// their values), each get theirs.
func TestCUDAScratch(t *testing.T) {
	ctx := testCtx(t)
	fakecuda.SetDelay(t, time.Millisecond)
	d, lib := fakeGPU(t, 64<<20)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d), scheduler.WithCUDAPipeline(2))
	k := gpuKernels(t, d)
	fill := loadKernel(t, d, fillPTX, "pz_fill_f64")
	addScratch := &scheduler.Codelet{Name: "add-scratch", CUDA: func(c *scheduler.CUDACall) error {
		n, _, _ := c.Dims(0)
		if err := launch1D(c, fill, n, c.Ptr(1), c.Arg.(float64), uint64(n)); err != nil {
			return err
		}
		return launch1D(c, k["pz_axpy_f64"], n, c.Ptr(0), 1.0, c.Ptr(1), uint64(n))
	}}
	const vecs, n = 6, 100
	tmp := make([]float64, n) // the scratch handle's shape; its data are never read
	ht, err := s.RegisterVector(tmp)
	require.NoError(t, err)
	data := make([][]float64, vecs)
	for v := range data {
		data[v] = make([]float64, n)
		h, err := s.RegisterVector(data[v])
		require.NoError(t, err)
		require.NoError(t, s.Submit(ctx, addScratch, scheduler.RW(h), scheduler.Scratch(ht), scheduler.WithArg(float64(v+1))))
	}
	require.NoError(t, s.WaitAll(ctx))
	for v := range data {
		for i, x := range data[v] {
			require.Equal(t, float64(v+1), x, "vector %d element %d", v, i)
		}
	}
	before, err := fakecuda.Stats(lib)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	after, err := fakecuda.Stats(lib)
	require.NoError(t, err)
	// Scratch buffers go back to the node's cache when their task ends,
	// for the next: as many as were in flight at once (one or two, as
	// the stand-in's timing goes) are freed at Close.
	require.GreaterOrEqual(t, before.LiveAllocations-after.LiveAllocations, uint64(1), "the worker's scratch buffers freed at Close")
}

// TestCUDAPartitions: with WithCUDAPartitions each of a GPU's workers
// runs on its own part of the SMs (a green context), and a scheduling
// context of one of them runs its kernels on that part; too many workers
// for the SMs is refused; PZ_CUDA_PARTITIONS turns it on.
func TestCUDAPartitions(t *testing.T) {
	ctx := testCtx(t)
	fakecuda.SetSMs(t, 32)
	d, lib := fakeGPU(t, 64<<20)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d),
		scheduler.WithCUDAWorkers(2), scheduler.WithCUDAPartitions())
	var gpu []int
	for _, w := range s.Workers() {
		if w.Kind == scheduler.CUDAWorker {
			require.Equal(t, 16, w.SMs, "half of the 32 SMs")
			gpu = append(gpu, w.ID)
		} else {
			require.Zero(t, w.SMs)
		}
	}
	require.Len(t, gpu, 2)
	part, err := s.NewContext("half", scheduler.ContextWorkers(gpu[0]))
	require.NoError(t, err)
	// A green context is a context of its own: modules are loaded in
	// the worker's context, once per context.
	var mu sync.Mutex
	loaded := map[*cuda.Context]*cuda.Function{}
	scale := &scheduler.Codelet{Name: "scale", CUDA: func(c *scheduler.CUDACall) error {
		mu.Lock()
		f := loaded[c.Context]
		if f == nil {
			m, err := c.Context.LoadPTX(context.Background(), kernelsPTX)
			if err == nil {
				f, err = m.Function(context.Background(), "pz_scale_f64")
			}
			if err != nil {
				mu.Unlock()
				return err
			}
			loaded[c.Context] = f
		}
		mu.Unlock()
		n, _, _ := c.Dims(0)
		return launch1D(c, f, n, c.Ptr(0), c.Arg.(float64), uint64(n))
	}}
	x := []float64{1, 2, 3}
	h, err := s.RegisterVector(x)
	require.NoError(t, err)
	for range 4 {
		require.NoError(t, s.Submit(scheduler.Within(ctx, part), scale, scheduler.RW(h), scheduler.WithArg(2.0)))
	}
	require.NoError(t, s.WaitAll(ctx))
	require.Equal(t, []float64{16, 32, 48}, x)
	st, err := fakecuda.Stats(lib)
	require.NoError(t, err)
	require.Equal(t, map[int]uint64{16: 4}, st.GreenKernels, "the kernels ran on a 16-SM partition")
	require.EqualValues(t, 2, st.GreenContexts)
	require.NoError(t, s.Close())

	// Five partitions of 32 SMs at 8 SMs a part cannot be.
	_, err = scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d),
		scheduler.WithCUDAWorkers(5), scheduler.WithCUDAPartitions(), scheduler.WithPerfModelDir(""))
	require.ErrorIs(t, err, scheduler.ErrBadOption)
	require.ErrorContains(t, err, "too few for 5 partitions")

	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "PZ_CUDA_PARTITIONS" {
				return v
			}
			return ""
		}
	}
	s2 := newSched(t, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d), scheduler.WithCUDAWorkers(4), scheduler.WithGetenv(env("1")))
	for _, w := range s2.Workers() {
		if w.Kind == scheduler.CUDAWorker {
			require.Equal(t, 8, w.SMs)
		}
	}
	_, err = scheduler.New(ctx, scheduler.WithCUDA(1), scheduler.WithCUDADriver(d), scheduler.WithGetenv(env("yes")))
	require.ErrorIs(t, err, scheduler.ErrBadOption)
}

// TestCUDAPipelineMoves: GPU workers with tasks in flight move between
// scheduling contexts (a safe point waits until a worker holds none):
// every task runs once, on the context's workers of the moment.
func TestCUDAPipelineMoves(t *testing.T) {
	ctx := testCtx(t)
	fakecuda.SetDelay(t, 500*time.Microsecond) // tasks stay in flight a while
	d, _ := fakeGPU(t, 64<<20)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d),
		scheduler.WithCUDAWorkers(2), scheduler.WithCUDAPipeline(3))
	var gpu []int
	for _, w := range s.Workers() {
		if w.Kind == scheduler.CUDAWorker {
			gpu = append(gpu, w.ID)
		}
	}
	a, err := s.NewContext("a", scheduler.ContextWorkers(gpu[0]))
	require.NoError(t, err)
	b, err := s.NewContext("b", scheduler.ContextWorkers(gpu[1]))
	require.NoError(t, err)
	scale, _, _ := cudaCodelets(gpuKernels(t, d))
	launched := make(chan struct{}, 100)
	counted := &scheduler.Codelet{Name: "scale", CUDA: func(c *scheduler.CUDACall) error {
		launched <- struct{}{}
		return scale.CUDA(c)
	}}
	const vecs = 40
	data := make([][]float64, vecs)
	for v := range data {
		data[v] = []float64{float64(v), 1}
		h, err := s.RegisterVector(data[v])
		require.NoError(t, err)
		require.NoError(t, s.Submit(scheduler.Within(ctx, a), counted, scheduler.RW(h), scheduler.WithArg(3.0)))
	}
	<-launched
	require.NoError(t, s.MoveWorkers(b, a, gpu[1])) // a grows while gpu[0] has tasks in flight
	for range 5 {
		<-launched
	}
	require.NoError(t, s.MoveWorkers(a, b, gpu[0])) // and loses its first worker
	require.NoError(t, s.WaitAll(ctx))
	for v := range data {
		require.Equal(t, []float64{3 * float64(v), 3}, data[v], "vector %d", v)
	}
}

// TestWatchdogNamesTheGPUsTask: a GPU worker's task whose work waits on
// its stream is the one the watchdog names for that worker (its oldest
// task in flight), with the worker's kind.
func TestWatchdogNamesTheGPUsTask(t *testing.T) {
	ctx := testCtx(t)
	d, _ := fakeGPU(t, 64<<20)
	report, ch := stallReports()
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d),
		scheduler.WithWatchdog(20*time.Millisecond, report))
	wait := loadKernel(t, d, waitPTX, "pz_wait_u32")
	addr, set := hostFlag(t, d)
	held := &scheduler.Codelet{Name: "held", CUDA: func(c *scheduler.CUDACall) error {
		return c.Context.Launch(ctx, wait, cuda.Dim3{X: 1}, cuda.Dim3{X: 1}, 0, c.Stream, addr)
	}}
	require.NoError(t, s.Submit(ctx, held))
	st := awaitRunningStall(t, ch)
	require.Len(t, st.Running, 1, st.String())
	r := st.Running[0]
	require.Equal(t, scheduler.CUDAWorker, r.Kind)
	require.Equal(t, "held", r.Codelet)
	require.Equal(t, 1, r.Worker, "worker 0 is the CPU worker")
	set()
	require.NoError(t, s.WaitAll(ctx))
}
