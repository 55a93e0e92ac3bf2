// Command cuda gives every rank its machine's CUDA GPUs and uses them two
// ways: as workers of the rank's scheduler, which run a codelet's CUDA
// implementation (a PTX kernel the driver compiles at run time) beside
// its CPU one, and as resource-set components, for a collective between
// device buffers (AllReduceDevice). Without a GPU (or a driver) the
// tasks run on the CPUs and the collective is skipped (rank 0 says on
// which ranks no GPU was found); every rank checks
// its results either way.
//
//	PZ_RANKS=2 go run ./examples/cuda
//	go build -tags mpi -o /tmp/cuda ./examples/cuda && mpirun -n 2 --oversubscribe /tmp/cuda
//
// PZ_CUDA_LIBRARY names another driver library (the tests' stand-in,
// internal/fakecuda, runs it on a machine without a GPU).
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pzgo/pz/examples/internal/cli"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/resourceset"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler"
)

// scalePTX is x[i] *= a for i < n, for any GPU from sm_52 on.
const scalePTX = `
.version 7.0
.target sm_52
.address_size 64

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
	@%p1 bra 	DONE;
	cvta.to.global.u64 	%rd4, %rd1;
	shl.b64 	%rd5, %rd3, 3;
	add.s64 	%rd6, %rd4, %rd5;
	ld.global.f64 	%fd2, [%rd6];
	mul.f64 	%fd3, %fd2, %fd1;
	st.global.f64 	[%rd6], %fd3;
DONE:
	ret;
}
`

const (
	n      = 1 << 20 // float64s: 8 MiB
	chunks = 16
	rounds = 2
)

func main() {
	cli.Parse("cuda", cli.NoArgs)
	run := func(ctx context.Context, rt *runtimeview.RuntimeView) error { return run(ctx, rt, os.Stdout) }
	if err := runtimeview.Run(context.Background(), 0, run, runtimeview.WithCUDA(-1)); err != nil {
		log.Fatal(err)
	}
}

// kernels loads the module once per CUDA context: the workers of one
// GPU each have a Context of their own, but they share the GPU's primary
// context, where the module lives - unless they run on green contexts
// (scheduler.WithCUDAPartitions, PZ_CUDA_PARTITIONS=1), each a context
// with modules of its own.
type kernels struct {
	mu sync.Mutex
	fn map[moduleKey]*cuda.Function
}

// moduleKey names a CUDA context: a GPU's primary one, or a green one.
type moduleKey struct {
	ordinal int
	green   uintptr // 0: the primary context
}

func (k *kernels) scale(ctx context.Context, c *cuda.Context) (*cuda.Function, error) {
	key := moduleKey{c.Ordinal(), c.GreenHandle()}
	k.mu.Lock()
	defer k.mu.Unlock()
	if f := k.fn[key]; f != nil {
		return f, nil
	}
	m, err := c.LoadPTX(ctx, scalePTX)
	if err != nil {
		return nil, err
	}
	f, err := m.Function(ctx, "pz_scale_f64")
	if err != nil {
		return nil, err
	}
	k.fn[key] = f
	return f, nil
}

// run does both uses of the rank's GPUs and checks them; it prints on
// out.
func run(ctx context.Context, rt *runtimeview.RuntimeView, out io.Writer) error {
	gpus := rt.MyResourceSet().Devices()
	d, err := rt.Scheduler(ctx)
	if err != nil {
		return err
	}
	s := d.Local()

	// 1. Tasks with a CPU and a CUDA implementation over chunks of x.
	k := &kernels{fn: map[moduleKey]*cuda.Function{}}
	var onGPU atomic.Int64
	scale := &scheduler.Codelet{
		Name: "scale",
		CPU: func(c *scheduler.Call) error {
			x := scheduler.VectorOf[float64](c, 0)
			for i := range x {
				x[i] *= c.Arg.(float64)
			}
			return nil
		},
		CUDA: func(c *scheduler.CUDACall) error {
			f, err := k.scale(ctx, c.Context)
			if err != nil {
				return err
			}
			onGPU.Add(1)
			m, _, _ := c.Dims(0)
			const block = 256
			return c.Context.Launch(ctx, f, cuda.Dim3{X: uint32((m + block - 1) / block)}, cuda.Dim3{X: block}, 0, c.Stream,
				c.Ptr(0), c.Arg.(float64), uint64(m))
		},
	}
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(i)
	}
	h, err := s.RegisterVector(x, scheduler.Named("x"))
	if err != nil {
		return err
	}
	parts, err := h.Partition(scheduler.Blocks(n/chunks, 1))
	if err != nil {
		return err
	}
	for range rounds {
		for _, p := range parts {
			if err := s.Submit(ctx, scale, scheduler.RW(p[0]), scheduler.WithArg(2.0)); err != nil {
				return err
			}
		}
	}
	if err := h.Unpartition(); err != nil {
		return err
	}
	if _, err := h.Unregister(ctx); err != nil {
		return err
	}
	for _, i := range []int{0, 1, n / 2, n - 1} {
		if want := float64(i) * 4; x[i] != want {
			return fmt.Errorf("rank %d: x[%d] = %g, want %g", rt.Rank(), i, x[i], want)
		}
	}
	names := []string{"no GPU"}
	if len(gpus) > 0 {
		names = names[:0]
		for _, g := range gpus {
			names = append(names, g.Name())
		}
	}
	fmt.Fprintf(out, "rank %d (%s): %d tasks, %d on GPUs, x right\n", rt.Rank(), strings.Join(names, ", "), chunks*rounds, onGPU.Load())

	// 2. A collective between GPU buffers, when every rank has a GPU.
	counts, err := runtimeview.AllGather(ctx, rt, []int{len(gpus)})
	if err != nil {
		return err
	}
	var without []string
	for r, c := range counts {
		if c[0] == 0 {
			without = append(without, fmt.Sprint(r))
		}
	}
	if len(without) > 0 {
		if rt.Rank() == 0 {
			fmt.Fprintf(out, "AllReduceDevice skipped: no GPU on rank %s\n", strings.Join(without, ", "))
		}
		return nil
	}
	buf, err := resourceset.Alloc[float64](gpus[0], 1024)
	if err != nil {
		return err
	}
	defer buf.Free()
	mine := make([]float64, buf.Len())
	for i := range mine {
		mine[i] = float64(rt.Rank())
	}
	if err := buf.CopyFrom(ctx, mine); err != nil {
		return err
	}
	if err := runtimeview.AllReduceDevice(ctx, rt, buf, comm.Sum); err != nil {
		return err
	}
	if err := buf.CopyTo(ctx, mine); err != nil {
		return err
	}
	size := float64(rt.Size())
	if want := size * (size - 1) / 2; mine[1023] != want {
		return fmt.Errorf("rank %d: AllReduceDevice gave %g, want %g", rt.Rank(), mine[1023], want)
	}
	if rt.Rank() == 0 {
		fmt.Fprintf(out, "AllReduceDevice over %d ranks' GPUs: right\n", rt.Size())
	}
	return nil
}
