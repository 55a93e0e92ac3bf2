package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
	"github.com/pzgo/pz/scheduler"
)

// The CUDA worker's tests run on the stand-in driver of internal/fakecuda
// (a C library loaded in place of libcuda: per-thread contexts, device
// pointers the host cannot dereference, asynchronous streams), and the
// scenario of TestCUDARealGPU on a real GPU when the machine has one.

// kernelsPTX holds the kernels the CUDA codelets launch, as PTX a real
// driver JIT-compiles (sm_52 and later); the stand-in driver runs
// built-in host versions of the same names.
const kernelsPTX = `
.version 7.0
.target sm_52
.address_size 64

// x[i] *= a for i < n
.visible .entry pz_scale_f64(
	.param .u64 pz_scale_f64_param_x,
	.param .f64 pz_scale_f64_param_a,
	.param .u64 pz_scale_f64_param_n
)
{
	.reg .pred 	%p<2>;
	.reg .f64 	%fd<4>;
	.reg .b32 	%r<5>;
	.reg .b64 	%rd<7>;

	ld.param.u64 	%rd1, [pz_scale_f64_param_x];
	ld.param.f64 	%fd1, [pz_scale_f64_param_a];
	ld.param.u64 	%rd2, [pz_scale_f64_param_n];
	mov.u32 	%r1, %ctaid.x;
	mov.u32 	%r2, %ntid.x;
	mov.u32 	%r3, %tid.x;
	mad.lo.s32 	%r4, %r1, %r2, %r3;
	cvt.u64.u32 	%rd3, %r4;
	setp.ge.u64 	%p1, %rd3, %rd2;
	@%p1 bra 	SCALE_DONE;
	cvta.to.global.u64 	%rd4, %rd1;
	shl.b64 	%rd5, %rd3, 3;
	add.s64 	%rd6, %rd4, %rd5;
	ld.global.f64 	%fd2, [%rd6];
	mul.f64 	%fd3, %fd2, %fd1;
	st.global.f64 	[%rd6], %fd3;
SCALE_DONE:
	ret;
}

// y[i] += a*x[i] for i < n
.visible .entry pz_axpy_f64(
	.param .u64 pz_axpy_f64_param_y,
	.param .f64 pz_axpy_f64_param_a,
	.param .u64 pz_axpy_f64_param_x,
	.param .u64 pz_axpy_f64_param_n
)
{
	.reg .pred 	%p<2>;
	.reg .f64 	%fd<5>;
	.reg .b32 	%r<5>;
	.reg .b64 	%rd<10>;

	ld.param.u64 	%rd1, [pz_axpy_f64_param_y];
	ld.param.f64 	%fd1, [pz_axpy_f64_param_a];
	ld.param.u64 	%rd2, [pz_axpy_f64_param_x];
	ld.param.u64 	%rd3, [pz_axpy_f64_param_n];
	mov.u32 	%r1, %ctaid.x;
	mov.u32 	%r2, %ntid.x;
	mov.u32 	%r3, %tid.x;
	mad.lo.s32 	%r4, %r1, %r2, %r3;
	cvt.u64.u32 	%rd4, %r4;
	setp.ge.u64 	%p1, %rd4, %rd3;
	@%p1 bra 	AXPY_DONE;
	cvta.to.global.u64 	%rd5, %rd1;
	cvta.to.global.u64 	%rd6, %rd2;
	shl.b64 	%rd7, %rd4, 3;
	add.s64 	%rd8, %rd5, %rd7;
	add.s64 	%rd9, %rd6, %rd7;
	ld.global.f64 	%fd2, [%rd8];
	ld.global.f64 	%fd3, [%rd9];
	fma.rn.f64 	%fd4, %fd1, %fd3, %fd2;
	st.global.f64 	[%rd8], %fd4;
AXPY_DONE:
	ret;
}
`

// fakeGPU opens a fresh instance of the stand-in driver with one GPU of
// memory bytes: its state is this test's alone.
func fakeGPU(t *testing.T, memory int64) (*cuda.Driver, string) {
	return fakecuda.Open(t, 1, memory)
}

// gpuKernels loads kernelsPTX on GPU 0 of d and returns the kernels by
// name; the module lives in the GPU's primary context, which the
// scheduler's workers share.
func gpuKernels(t *testing.T, d *cuda.Driver) map[string]*cuda.Function {
	t.Helper()
	ctx := testCtx(t)
	c, err := d.NewContext(ctx, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	m, err := c.LoadPTX(ctx, kernelsPTX)
	require.NoError(t, err)
	out := map[string]*cuda.Function{}
	for _, name := range []string{"pz_scale_f64", "pz_axpy_f64"} {
		f, err := m.Function(ctx, name)
		require.NoError(t, err)
		out[name] = f
	}
	return out
}

// launch1D runs kernel f over n elements on the call's stream.
func launch1D(c *scheduler.CUDACall, f *cuda.Function, n int, args ...any) error {
	const block = 256
	grid := cuda.Dim3{X: uint32((n + block - 1) / block)}
	return c.Context.Launch(context.Background(), f, grid, cuda.Dim3{X: block}, 0, c.Stream, args...)
}

// cudaCodelets are a GPU-only scale, a GPU-only axpy and a CPU-only
// increment of vectors of float64.
func cudaCodelets(k map[string]*cuda.Function) (scale, axpy, inc *scheduler.Codelet) {
	scale = &scheduler.Codelet{Name: "scale", CUDA: func(c *scheduler.CUDACall) error {
		n, _, _ := c.Dims(0)
		return launch1D(c, k["pz_scale_f64"], n, c.Ptr(0), c.Arg.(float64), uint64(n))
	}}
	axpy = &scheduler.Codelet{Name: "axpy", CUDA: func(c *scheduler.CUDACall) error {
		n, _, _ := c.Dims(0)
		return launch1D(c, k["pz_axpy_f64"], n, c.Ptr(0), c.Arg.(float64), c.Ptr(1), uint64(n))
	}}
	inc = &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
		x := scheduler.VectorOf[float64](c, 0)
		for i := range x {
			x[i]++
		}
		return nil
	}}
	return scale, axpy, inc
}

// runGPUScenario moves two vectors between RAM and the GPU through a
// chain of GPU-only and CPU-only tasks and checks every element.
func runGPUScenario(t *testing.T, d *cuda.Driver) *scheduler.Scheduler {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d))
	var kinds []string
	for _, w := range s.Workers() {
		kinds = append(kinds, w.Kind.String())
	}
	require.Equal(t, []string{"cpu", "cuda"}, kinds)
	require.Equal(t, "[ram cuda0]", fmt.Sprint(s.MemoryNodes()))

	const n = 1000
	x, y := make([]float64, n), make([]float64, n)
	for i := range x {
		x[i], y[i] = float64(i), float64(3*i)
	}
	hx, err := s.RegisterVector(x, scheduler.Named("x"))
	require.NoError(t, err)
	hy, err := s.RegisterVector(y, scheduler.Named("y"))
	require.NoError(t, err)
	scale, axpy, inc := cudaCodelets(gpuKernels(t, d))
	require.NoError(t, s.Submit(ctx, scale, scheduler.RW(hx), scheduler.WithArg(2.0)))                 // x = 2i
	require.NoError(t, s.Submit(ctx, inc, scheduler.RW(hx)))                                           // x = 2i+1, on the CPU
	require.NoError(t, s.Submit(ctx, scale, scheduler.RW(hx), scheduler.WithArg(3.0)))                 // x = 6i+3
	require.NoError(t, s.Submit(ctx, axpy, scheduler.RW(hy), scheduler.WithArg(0.5), scheduler.R(hx))) // y = 3i + 3i+1.5
	require.NoError(t, s.WaitAll(ctx))
	for i := range x {
		require.Equal(t, float64(6*i+3), x[i], "x[%d]", i)
		require.Equal(t, float64(6*i)+1.5, y[i], "y[%d]", i)
	}
	return s
}

func TestCUDAWorkerRunsKernels(t *testing.T) {
	d, lib := fakeGPU(t, 64<<20)
	s := runGPUScenario(t, d)
	var in, out int64
	for _, tr := range s.Transfers() {
		if tr.From == scheduler.RAM && tr.To != scheduler.RAM {
			in += tr.Count
		}
		if tr.From != scheduler.RAM && tr.To == scheduler.RAM {
			out += tr.Count
		}
	}
	require.GreaterOrEqual(t, in, int64(3), "x in twice (around the CPU task), y once")
	require.GreaterOrEqual(t, out, int64(2), "x out for the CPU task, both home at WaitAll")
	require.NoError(t, s.Close())
	st, err := fakecuda.Stats(lib)
	require.NoError(t, err)
	require.Zero(t, st.InvalidContext, "driver calls from a thread without the context current")
	require.EqualValues(t, 3, st.Kernels, "kernels launched")
}

// TestCUDARealGPU runs the same scenario on the machine's first GPU.
func TestCUDARealGPU(t *testing.T) {
	d, err := cuda.Open()
	if cuda.IsNoDriver(err) {
		t.Skip("no CUDA driver on this machine: the CUDA worker is tested on the stand-in driver (TestCUDAWorkerRunsKernels)")
	}
	require.NoError(t, err)
	if n, _ := d.DeviceCount(); n == 0 {
		t.Skip("the CUDA driver sees no GPU")
	}
	runGPUScenario(t, d)
}

// TestCUDATiles gives the GPU tiles of a matrix with a leading dimension
// wider than its columns: 2-D copies in and out, and the gaps between
// rows untouched.
func TestCUDATiles(t *testing.T) {
	ctx := testCtx(t)
	d, _ := fakeGPU(t, 64<<20)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d))
	k := gpuKernels(t, d)
	// The kernel sees a tile as a dense vector of rows*cols elements.
	scaleTile := &scheduler.Codelet{Name: "scaleTile", CUDA: func(c *scheduler.CUDACall) error {
		r, cols, ld := c.Dims(0)
		if ld != cols {
			return fmt.Errorf("tile of %dx%d with leading dimension %d on the GPU, want dense", r, cols, ld)
		}
		return launch1D(c, k["pz_scale_f64"], r*cols, c.Ptr(0), c.Arg.(float64), uint64(r*cols))
	}}
	const rows, cols, ld = 6, 6, 8
	a := make([]float64, rows*ld)
	for i := range a {
		a[i] = -1
		if i%ld < cols {
			a[i] = float64(i)
		}
	}
	h, err := s.RegisterMatrix(a, rows, cols, scheduler.LD(ld), scheduler.Named("a"))
	require.NoError(t, err)
	tiles, err := h.Partition(scheduler.Blocks(4, 4))
	require.NoError(t, err)
	for i, row := range tiles {
		for j, tl := range row {
			require.NoError(t, s.Submit(ctx, scaleTile, scheduler.RW(tl), scheduler.WithArg(float64(2+i*2+j))))
		}
	}
	require.NoError(t, h.Unpartition())
	_, err = h.Unregister(ctx)
	require.NoError(t, err)
	for i := 0; i < rows; i++ {
		for j := 0; j < ld; j++ {
			want := -1.0
			if j < cols {
				want = float64(i*ld+j) * float64(2+(i/4)*2+j/4)
			}
			require.Equal(t, want, a[i*ld+j], "element (%d,%d)", i, j)
		}
	}
}

// TestCUDAOutOfCore runs GPU-only tasks on twice the data the GPU holds:
// replicas are evicted (written back when the GPU held the only valid
// copy) and every result is right.
func TestCUDAOutOfCore(t *testing.T) {
	ctx := testCtx(t)
	const vecs, n = 16, 1024 // 16 vectors of 8 KiB
	d, _ := fakeGPU(t, 64<<10)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d))
	scale, _, _ := cudaCodelets(gpuKernels(t, d))
	data := make([][]float64, vecs)
	hs := make([]*scheduler.Handle, vecs)
	for v := range data {
		data[v] = make([]float64, n)
		for i := range data[v] {
			data[v][i] = float64(v*n + i)
		}
		var err error
		hs[v], err = s.RegisterVector(data[v], scheduler.Named("v"+strconv.Itoa(v)))
		require.NoError(t, err)
	}
	for round := range 2 {
		for v := range hs {
			require.NoError(t, s.Submit(ctx, scale, scheduler.RW(hs[v]), scheduler.WithArg(float64(round+2))))
		}
	}
	require.NoError(t, s.WaitAll(ctx))
	for v := range data {
		for i, x := range data[v] {
			require.Equal(t, float64(6*(v*n+i)), x, "vector %d element %d", v, i)
		}
	}
	var evictions, writeBacks int64
	for _, tr := range s.Transfers() {
		evictions += tr.Evictions
		writeBacks += tr.WriteBacks
	}
	require.Positive(t, evictions, "the GPU holds 8 of the 16 vectors")
	require.Positive(t, writeBacks)
}

// scaleEachTwice registers vecs vectors of n elements (element i of
// vector v holds v*n+i) and submits on each, one vector after another,
// a scale by 2 and one by 3; the returned check, after WaitAll, finds
// 6(v*n+i) everywhere.
func scaleEachTwice(ctx context.Context, t *testing.T, s *scheduler.Scheduler, scale *scheduler.Codelet, vecs, n int) (check func()) {
	t.Helper()
	data := make([][]float64, vecs)
	for v := range data {
		data[v] = make([]float64, n)
		for i := range data[v] {
			data[v][i] = float64(v*n + i)
		}
		h, err := s.RegisterVector(data[v])
		require.NoError(t, err)
		for _, by := range []float64{2, 3} {
			require.NoError(t, s.Submit(ctx, scale, scheduler.RW(h), scheduler.WithArg(by)))
		}
	}
	return func() {
		for v := range data {
			for i, x := range data[v] {
				require.Equal(t, float64(6*(v*n+i)), x, "vector %d element %d", v, i)
			}
		}
	}
}

// TestCUDAMemoryLimit: a GPU with room for all the data runs the same
// graph in core (no eviction); capped by WithCUDAMemoryLimit (or
// PZ_LIMIT_CUDA_MEM) below the data's size, it runs out of core
// (evictions) with the same result. Bad limits are refused.
func TestCUDAMemoryLimit(t *testing.T) {
	ctx := testCtx(t)
	const vecs, n = 16, 1024 // 16 vectors of 8 KiB: 128 KiB
	d, _ := fakeGPU(t, 4<<20)
	run := func(t *testing.T, opts ...scheduler.Option) (evictions int64) {
		s := newSched(t, append([]scheduler.Option{scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d)}, opts...)...)
		scale, _, _ := cudaCodelets(gpuKernels(t, d))
		check := scaleEachTwice(ctx, t, s, scale, vecs, n)
		require.NoError(t, s.WaitAll(ctx))
		check()
		for _, tr := range s.Transfers() {
			evictions += tr.Evictions
		}
		return evictions
	}
	assert.Zero(t, run(t), "4 MiB hold the 128 KiB")
	assert.Positive(t, run(t, scheduler.WithCUDAMemoryLimit(64<<10)), "a 64 KiB limit holds 8 of the 16 vectors")
	assert.Positive(t, run(t, scheduler.WithGetenv(func(k string) string {
		if k == "PZ_LIMIT_CUDA_MEM" {
			return "64KiB"
		}
		return ""
	})), "PZ_LIMIT_CUDA_MEM=64KiB")

	for _, opts := range [][]scheduler.Option{
		{scheduler.WithCUDAMemoryLimit(0)},
		{scheduler.WithCUDAMemoryLimit(-5)},
		{scheduler.WithGetenv(func(k string) string {
			if k == "PZ_LIMIT_CUDA_MEM" {
				return "lots"
			}
			return ""
		})},
	} {
		_, err := scheduler.New(ctx, append([]scheduler.Option{scheduler.WithCUDA(1), scheduler.WithCUDADriver(d), scheduler.WithPerfModelDir("")}, opts...)...)
		assert.ErrorIs(t, err, scheduler.ErrBadOption)
	}
}

// TestCUDATaskErrors: an error a CUDA implementation returns fails its
// task with the codelet's name and the message, and the worker goes on
// with the next task.
func TestCUDATaskErrors(t *testing.T) {
	ctx := testCtx(t)
	d, _ := fakeGPU(t, 64<<20)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d))
	scale, _, _ := cudaCodelets(gpuKernels(t, d))
	bad := &scheduler.Codelet{Name: "bad", CUDA: func(c *scheduler.CUDACall) error {
		return errors.New("no kernel for this shape")
	}}
	panics := &scheduler.Codelet{Name: "panics", CUDA: func(c *scheduler.CUDACall) error {
		_ = c.Ptr(5) // there is no buffer 5
		return nil
	}}
	x, y := []float64{1, 2, 3}, []float64{4, 5, 6}
	hx, err := s.RegisterVector(x)
	require.NoError(t, err)
	hy, err := s.RegisterVector(y)
	require.NoError(t, err)
	require.NoError(t, s.Submit(ctx, bad, scheduler.RW(hx)))
	require.NoError(t, s.Submit(ctx, panics, scheduler.RW(hy)))
	err = s.WaitAll(ctx)
	require.Error(t, err)
	require.Contains(t, err.Error(), `"bad"`)
	require.Contains(t, err.Error(), "no kernel for this shape")
	require.Contains(t, err.Error(), `"panics"`)
	require.Equal(t, 1, strings.Count(err.Error(), "\n"), "one line per failed task: %s", err)

	// The handles and the worker are usable again: a W task starts a new
	// version, and the GPU runs it.
	z := []float64{7, 8, 9}
	hz, err := s.RegisterVector(z)
	require.NoError(t, err)
	require.NoError(t, s.Submit(ctx, scale, scheduler.RW(hz), scheduler.WithArg(2.0)))
	require.NoError(t, s.WaitAll(ctx))
	require.Equal(t, []float64{14, 16, 18}, z)
}

// TestCUDAInputs feeds what the CUDA path must refuse or tolerate.
func TestCUDAInputs(t *testing.T) {
	ctx := testCtx(t)
	gpuOnly := &scheduler.Codelet{Name: "gpuOnly", CUDA: func(*scheduler.CUDACall) error { return nil }}

	t.Run("no driver means no GPU workers", func(t *testing.T) {
		if _, err := cuda.Open(); !cuda.IsNoDriver(err) {
			t.Skip("this machine has a CUDA driver")
		}
		s := newSched(t, scheduler.WithWorkers(1), scheduler.WithCUDA(-1))
		require.Len(t, s.Workers(), 1)
		h, err := s.RegisterVector([]float64{1})
		require.NoError(t, err)
		err = s.Submit(ctx, gpuOnly, scheduler.RW(h))
		require.ErrorIs(t, err, scheduler.ErrNoImplementation)
		require.Contains(t, err.Error(), "0 cuda")
	})
	t.Run("PZ_NCUDA", func(t *testing.T) {
		_, err := scheduler.New(ctx, scheduler.WithPerfModelDir(""), scheduler.WithGetenv(func(k string) string {
			if k == "PZ_NCUDA" {
				return "all"
			}
			return ""
		}))
		require.ErrorIs(t, err, scheduler.ErrBadOption)
		require.Contains(t, err.Error(), `PZ_NCUDA="all"`)
	})
	t.Run("data that cannot go to a GPU", func(t *testing.T) {
		d, _ := fakeGPU(t, 1<<20)
		s := newSched(t, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d))
		v, err := s.RegisterValue(new(int))
		require.NoError(t, err)
		err = s.Submit(ctx, gpuOnly, scheduler.RW(v))
		require.ErrorIs(t, err, scheduler.ErrNoImplementation)
		require.Contains(t, err.Error(), "value handle")
		h, err := s.RegisterVector([]float64{1, 2})
		require.NoError(t, err)
		err = s.Submit(ctx, gpuOnly, scheduler.RW(h), scheduler.Scratch(v))
		require.ErrorIs(t, err, scheduler.ErrNoImplementation, "a value handle's scratch buffer cannot be GPU memory")
		err = s.Submit(ctx, gpuOnly, scheduler.RW(h), scheduler.WithTeam(2))
		require.ErrorIs(t, err, scheduler.ErrBadTeam)
		require.NoError(t, s.Submit(ctx, gpuOnly, scheduler.RW(h)))
		require.NoError(t, s.WaitAll(ctx))
	})
}

// TestCUDAWorkersShareGPU gives one GPU two workers, each in a context
// of its own: both run tasks, on the one copy of the data the GPU holds.
func TestCUDAWorkersShareGPU(t *testing.T) {
	ctx := testCtx(t)
	d, _ := fakeGPU(t, 64<<20)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDAWorkers(2), scheduler.WithCUDADriver(d))
	var gpuWorkers []int
	for _, w := range s.Workers() {
		if w.Kind == scheduler.CUDAWorker {
			gpuWorkers = append(gpuWorkers, w.ID)
			require.Equal(t, scheduler.MemoryNode(1), w.Node)
		}
	}
	require.Len(t, gpuWorkers, 2)
	k := gpuKernels(t, d)
	ran := make([]int, 2)
	scale := &scheduler.Codelet{Name: "scale", CUDA: func(c *scheduler.CUDACall) error {
		ran[c.Arg.(int)] = c.Worker
		n, _, _ := c.Dims(0)
		return launch1D(c, k["pz_scale_f64"], n, c.Ptr(0), 2.0, uint64(n))
	}}
	x := []float64{1, 2, 3, 4}
	hx, err := s.RegisterVector(x)
	require.NoError(t, err)
	for i, id := range gpuWorkers {
		cx, err := s.NewContext("gpu"+strconv.Itoa(i), scheduler.ContextWorkers(id))
		require.NoError(t, err)
		require.NoError(t, s.Submit(ctx, scale, scheduler.RW(hx), scheduler.WithArg(i), scheduler.InContext(cx)))
	}
	require.NoError(t, s.WaitAll(ctx))
	require.Equal(t, gpuWorkers, ran, "each task ran on its context's GPU worker")
	require.Equal(t, []float64{4, 8, 12, 16}, x)
	var in int64
	for _, tr := range s.Transfers() {
		if tr.From == scheduler.RAM && tr.To == 1 {
			in += tr.Count
		}
	}
	require.EqualValues(t, 1, in, "x went to the GPU once for both workers")

	_, err = scheduler.New(ctx, scheduler.WithPerfModelDir(""), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d), scheduler.WithCUDAWorkers(-1))
	require.ErrorIs(t, err, scheduler.ErrBadOption)
}

// TestCUDAHybrid runs codelets with CPU and CUDA implementations on CPU
// and GPU workers under several policies, on random chains over shared
// vectors, and compares with the sequential result.
func TestCUDAHybrid(t *testing.T) {
	for _, policy := range []string{"lws", "eager", "dmda"} {
		t.Run(policy, func(t *testing.T) {
			ctx := testCtx(t)
			d, lib := fakeGPU(t, 32<<10) // room for 4 of the 8 vectors
			s := newSched(t, scheduler.WithWorkers(2), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d), scheduler.WithPolicy(policy))
			k := gpuKernels(t, d)
			model := &scheduler.PerfModel{Name: "hybrid-" + policy}
			gpuScale, gpuAxpy, _ := cudaCodelets(k)
			var onCPU atomic.Int64
			scale := &scheduler.Codelet{Name: "scale", Model: model, CUDA: gpuScale.CUDA, CPU: func(c *scheduler.Call) error {
				onCPU.Add(1)
				x := scheduler.VectorOf[float64](c, 0)
				for i := range x {
					x[i] *= c.Arg.(float64)
				}
				return nil
			}}
			axpy := &scheduler.Codelet{Name: "axpy", Model: model, CUDA: gpuAxpy.CUDA, CPU: func(c *scheduler.Call) error {
				onCPU.Add(1)
				y, x := scheduler.VectorOf[float64](c, 0), scheduler.VectorOf[float64](c, 1)
				for i := range y {
					y[i] += c.Arg.(float64) * x[i]
				}
				return nil
			}}
			const vecs, n, ops = 8, 512, 200
			data, want := make([][]float64, vecs), make([][]float64, vecs)
			hs := make([]*scheduler.Handle, vecs)
			for v := range data {
				data[v], want[v] = make([]float64, n), make([]float64, n)
				for i := range data[v] {
					data[v][i] = float64((v*n + i) % 7)
					want[v][i] = data[v][i]
				}
				var err error
				hs[v], err = s.RegisterVector(data[v])
				require.NoError(t, err)
			}
			rng := rand.New(rand.NewPCG(1, uint64(len(policy))))
			// Which worker runs a task with both implementations is the
			// policy's choice; every fifth scale has one implementation
			// only, alternately the GPU's and a CPU's, so that both kinds
			// of worker touch the data whatever the policy does.
			gpuOnly := &scheduler.Codelet{Name: "scale_gpu", CUDA: scale.CUDA}
			cpuOnly := &scheduler.Codelet{Name: "scale_cpu", CPU: scale.CPU}
			scales := 0
			for range ops {
				y, x := rng.IntN(vecs), rng.IntN(vecs)
				if rng.IntN(3) == 0 || x == y {
					// Halving and doubling keep the values small integers or halves: exact.
					a := []float64{0.5, 2}[rng.IntN(2)]
					cl := scale
					if scales++; scales%5 == 0 {
						cl = []*scheduler.Codelet{gpuOnly, cpuOnly}[scales/5%2]
					}
					require.NoError(t, s.Submit(ctx, cl, scheduler.RW(hs[y]), scheduler.WithArg(a)))
					for i := range want[y] {
						want[y][i] *= a
					}
					continue
				}
				a := float64(rng.IntN(3) - 1)
				require.NoError(t, s.Submit(ctx, axpy, scheduler.RW(hs[y]), scheduler.WithArg(a), scheduler.R(hs[x])))
				for i := range want[y] {
					want[y][i] += a * want[x][i]
				}
			}
			require.NoError(t, s.WaitAll(ctx))
			for v := range data {
				require.Equal(t, want[v], data[v], "vector %d", v)
			}
			st, err := fakecuda.Stats(lib)
			require.NoError(t, err)
			t.Logf("%s: %d tasks on the GPU, %d on CPUs (of %d scales, %d on one kind only)", policy, st.Kernels, onCPU.Load(), scales, scales/5)
			require.GreaterOrEqual(t, st.Kernels, uint64(scales/10), "the GPU-only scales ran on the GPU")
			require.GreaterOrEqual(t, onCPU.Load(), int64(scales/10), "the CPU-only scales ran on CPUs")
		})
	}
}

// TestCUDASharedGPUFull: two schedulers share one GPU (as two ranks of
// a node do); one keeps most of its memory in replicas. A task of the
// other whose data cannot fit beside them is not left waiting for a
// signal that never comes: it runs on a CPU if it may, else fails with
// ErrDeviceMemory.
func TestCUDASharedGPUFull(t *testing.T) {
	ctx := testCtx(t)
	d, _ := fakeGPU(t, 64<<10)
	k := gpuKernels(t, d)
	scale, _, _ := cudaCodelets(k)
	a := newSched(t, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d))
	b := newSched(t, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d))

	// a's GPU keeps three vectors of 16 KiB after its tasks.
	for range 3 {
		h, err := a.RegisterVector(make([]float64, 2048))
		require.NoError(t, err)
		require.NoError(t, a.Submit(ctx, scale, scheduler.RW(h), scheduler.WithArg(2.0)))
	}
	require.NoError(t, a.WaitAll(ctx))

	// b's task needs two vectors of 16 KiB: 32 KiB beside a's 48 KiB on
	// a 64 KiB GPU.
	x, y := make([]float64, 2048), make([]float64, 2048)
	for i := range x {
		x[i], y[i] = 1, float64(i)
	}
	hx, err := b.RegisterVector(x)
	require.NoError(t, err)
	hy, err := b.RegisterVector(y)
	require.NoError(t, err)
	_, axpy, _ := cudaCodelets(k)
	require.NoError(t, b.Submit(ctx, axpy, scheduler.RW(hy), scheduler.WithArg(2.0), scheduler.R(hx)))
	err = b.WaitAll(ctx)
	require.ErrorIs(t, err, scheduler.ErrDeviceMemory)
	require.Contains(t, err.Error(), "memory this scheduler does not hold")

	// With a CPU implementation the task runs (on the CPU worker, by the
	// policy's choice or redirected from the GPU worker). A failed RW
	// task's dependents are canceled, so it works on new data.
	hybrid := &scheduler.Codelet{Name: "axpy", CUDA: axpy.CUDA, CPU: func(c *scheduler.Call) error {
		y, x := scheduler.VectorOf[float64](c, 0), scheduler.VectorOf[float64](c, 1)
		for i := range y {
			y[i] += c.Arg.(float64) * x[i]
		}
		return nil
	}}
	for round := range 4 {
		z := make([]float64, 2048)
		hz, err := b.RegisterVector(z)
		require.NoError(t, err)
		require.NoError(t, b.Submit(ctx, hybrid, scheduler.RW(hz), scheduler.WithArg(float64(round)), scheduler.R(hx)))
		require.NoError(t, b.WaitAll(ctx))
		require.Equal(t, float64(round), z[7], "round %d", round)
	}
}

// TestCUDAGivenGPUNotOpenedTwice: a GPU given with WithDevices (as the
// RuntimeView gives its own) is not opened again by WithCUDA: one GPU,
// one memory node.
func TestCUDAGivenGPUNotOpenedTwice(t *testing.T) {
	d, _ := fakeGPU(t, 1<<20)
	a, err := d.NewAccel(testCtx(t), 0)
	require.NoError(t, err)
	defer a.Close()
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithDevices(a), scheduler.WithCUDA(-1), scheduler.WithCUDADriver(d))
	require.Equal(t, "[ram cuda0]", fmt.Sprint(s.MemoryNodes()))
	require.Len(t, s.Workers(), 2)
}

// TestCUDAKernelFault: a kernel that faults on the GPU fails its task
// with the driver's error and the codelet's name, reported by the stream
// the worker waits for. (Only on the stand-in driver: on a real GPU a
// fault spoils the whole context.)
func TestCUDAKernelFault(t *testing.T) {
	ctx := testCtx(t)
	d, _ := fakeGPU(t, 1<<20)
	c, err := d.NewContext(ctx, 0)
	require.NoError(t, err)
	defer c.Close()
	m, err := c.LoadPTX(ctx, ".version 7.0\n.target sm_52\n.address_size 64\n.visible .entry pz_fail()\n{\n\ttrap;\n}\n")
	require.NoError(t, err)
	fail, err := m.Function(ctx, "pz_fail")
	require.NoError(t, err)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d))
	faults := &scheduler.Codelet{Name: "faults", CUDA: func(c *scheduler.CUDACall) error {
		return c.Context.Launch(context.Background(), fail, cuda.Dim3{X: 1}, cuda.Dim3{X: 1}, 0, c.Stream)
	}}
	h, err := s.RegisterVector([]float64{1, 2, 3})
	require.NoError(t, err)
	require.NoError(t, s.Submit(ctx, faults, scheduler.RW(h)))
	err = s.WaitAll(ctx)
	require.ErrorIs(t, err, cuda.ErrLaunchFailed)
	require.Contains(t, err.Error(), `"faults"`)
	require.Contains(t, err.Error(), "CUDA_ERROR_LAUNCH_FAILED")
}

// TestCUDARedux accumulates x_k for 16 vectors into a Redux vector with
// a GPU-only axpy, two tasks in flight per GPU worker: the worker's
// private copy lives on the GPU (initialized on the host, copied up),
// tasks adding to it one after the other, and the reduction brings it
// home and adds it to the handle's value; a CPU-only task beside it
// contributes in RAM. Three rounds: each group gets a fresh copy, from
// the memory the last one gave back.
func TestCUDARedux(t *testing.T) {
	ctx := testCtx(t)
	d, lib := fakeGPU(t, 64<<20)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d), scheduler.WithCUDAPipeline(2))
	_, axpy, _ := cudaCodelets(gpuKernels(t, d))
	zero := &scheduler.Codelet{Name: "zero", CPU: func(c *scheduler.Call) error {
		clear(scheduler.VectorOf[float64](c, 0))
		return nil
	}}
	add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
		dst, src := scheduler.VectorOf[float64](c, 0), scheduler.VectorOf[float64](c, 1)
		for i := range dst {
			dst[i] += src[i]
		}
		return nil
	}}
	addCPU := &scheduler.Codelet{Name: "add1", CPU: func(c *scheduler.Call) error {
		for i, x := range scheduler.VectorOf[float64](c, 0) {
			scheduler.VectorOf[float64](c, 0)[i] = x + 1
		}
		return nil
	}}
	const n, nx = 1 << 16, 16
	acc := make([]float64, n)
	for i := range acc {
		acc[i] = 1000 // kept: the contributions add to it
	}
	ha, err := s.RegisterVector(acc, scheduler.Named("acc"))
	require.NoError(t, err)
	require.NoError(t, ha.SetReduction(zero, add))
	xs := make([]*scheduler.Handle, nx)
	for k := range xs {
		x := make([]float64, n)
		for i := range x {
			x[i] = float64(k*n + i)
		}
		if xs[k], err = s.RegisterVector(x); err != nil {
			t.Fatal(err)
		}
	}
	var live []uint64 // the GPU's allocations after each round
	for round := 1; round <= 3; round++ {
		for k := range xs {
			require.NoError(t, s.Submit(ctx, axpy, scheduler.Redux(ha), scheduler.WithArg(1.0), scheduler.R(xs[k])))
		}
		require.NoError(t, s.Submit(ctx, addCPU, scheduler.Redux(ha)))
		require.NoError(t, s.WaitAll(ctx))
		for i, v := range acc {
			// sum over k of (k*n + i) = n*nx(nx-1)/2 + nx*i, plus 1 from the CPU task
			want := 1000 + float64(round)*(float64(n*nx*(nx-1)/2+nx*i)+1)
			require.Equal(t, want, v, "element %d after round %d", i, round)
		}
		st, err := fakecuda.Stats(lib)
		require.NoError(t, err)
		live = append(live, st.LiveAllocations)
	}
	require.Equal(t, live[1], live[2], "a round's private copy is given back for the next")
	require.NoError(t, s.Close())
	st, err := fakecuda.Stats(lib)
	require.NoError(t, err)
	require.EqualValues(t, 3*nx, st.Kernels, "every axpy ran on the GPU")
	require.Zero(t, st.InvalidContext)
}

// TestCUDAOnlyCodeletSaysWhyNoGPU: GPUs asked for where no driver loads:
// a CUDA-only codelet's refusal says why there is no GPU, instead of
// advising WithCUDA, which was given.
func TestCUDAOnlyCodeletSaysWhyNoGPU(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithCUDA(1),
		scheduler.WithGetenv(func(string) string { return "" }))
	for _, w := range s.Workers() {
		if w.Kind == scheduler.CUDAWorker {
			t.Skip("a CUDA driver and GPU are here")
		}
	}
	only := &scheduler.Codelet{Name: "gpu-only", CUDA: func(*scheduler.CUDACall) error { return nil }}
	err := s.Submit(ctx, only)
	require.ErrorIs(t, err, scheduler.ErrNoImplementation)
	assert.Contains(t, err.Error(), "GPUs were asked for, but ") // no driver, or no GPU
	assert.NotContains(t, err.Error(), "(WithCUDA)")
}
