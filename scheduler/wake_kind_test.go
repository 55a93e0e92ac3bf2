package scheduler

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
)

// TestWakeWorkerThatCanRun: a CPU worker that releases a GPU-only task
// into a shared queue (eager) must wake the GPU worker, not the other
// CPU worker, which would find nothing it may run and sleep again while
// the task waited forever. The gate holds one CPU worker until the other
// CPU worker and the GPU worker sleep; then its end releases the
// GPU-only task. (Seen as a hang of TestCUDAHybrid under load.)
func TestWakeWorkerThatCanRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, _ := fakecuda.Open(t, 1, 1<<20)
	s, err := New(ctx, WithWorkers(2), WithCUDA(1), WithCUDADriver(d), WithPolicy("eager"),
		WithPerfModelDir(""), WithGetenv(func(string) string { return "" }))
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, CUDAWorker, s.workers[2].info.Kind)

	x := []float64{1, 2, 3}
	h, err := s.RegisterVector(x)
	require.NoError(t, err)
	gate := &Codelet{Name: "gate", CPU: func(c *Call) error {
		for _, w := range s.workers {
			for w.info.ID != c.Worker && !w.sleeping.Load() {
				if ctx.Err() != nil {
					t.Error("the other workers never slept")
					return nil
				}
				runtime.Gosched()
			}
		}
		return nil
	}}
	ran := make(chan int, 1)
	gpuOnly := &Codelet{Name: "gpu-only", CUDA: func(c *CUDACall) error {
		ran <- c.Worker
		return nil
	}}
	require.NoError(t, s.Submit(ctx, gate, RW(h)))
	require.NoError(t, s.Submit(ctx, gpuOnly, RW(h)))
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if err := s.WaitAll(wctx); err != nil {
		s.wakeAll() // so that Close ends
		t.Fatalf("the GPU worker was never woken for its task: %v", err)
	}
	require.Equal(t, 2, <-ran)
}

// TestCUDAWorkerSleepsWithTaskInFlight: a GPU worker whose task in
// flight runs long sleeps, as a CPU worker does, and a push wakes it for
// the next task, which it launches while the first still runs. The first
// task's kernel waits for a word only the second task sets: a worker
// that blocked on its oldest task's event would never take the second.
func TestCUDAWorkerSleepsWithTaskInFlight(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, _ := fakecuda.Open(t, 1, 1<<20)
	s, err := New(ctx, WithWorkers(1), WithCUDA(1), WithCUDADriver(d), WithCUDAPipeline(2),
		WithPerfModelDir(""), WithGetenv(func(string) string { return "" }))
	require.NoError(t, err)
	defer s.Close()
	gpu := s.workers[1]
	require.Equal(t, CUDAWorker, gpu.info.Kind)

	c, err := d.NewContext(ctx, 0)
	require.NoError(t, err)
	defer c.Close()
	m, err := c.LoadPTX(ctx, ".version 7.0\n.target sm_52\n.address_size 64\n.visible .entry pz_wait_u32(.param .u64 flag) { ret; }\n")
	require.NoError(t, err)
	wait, err := m.Function(ctx, "pz_wait_u32")
	require.NoError(t, err)
	flag, err := c.AllocHost(ctx, 4)
	require.NoError(t, err)
	clear(flag) // page-locked memory comes as it was left: a freed flag held 1
	word := (*uint32)(unsafe.Pointer(&flag[0]))
	defer func() {
		atomic.StoreUint32(word, 1) // a kernel still waiting ends
		_ = s.Close()
		_ = c.FreeHost(ctx, flag)
	}()

	first := &Codelet{Name: "first", CUDA: func(cc *CUDACall) error {
		return cc.Context.Launch(ctx, wait, cuda.Dim3{X: 1}, cuda.Dim3{X: 1}, 0, cc.Stream, uint64(uintptr(unsafe.Pointer(word))))
	}}
	second := &Codelet{Name: "second", CUDA: func(*CUDACall) error {
		atomic.StoreUint32(word, 1)
		return nil
	}}
	x, y := []float64{1}, []float64{2}
	hx, err := s.RegisterVector(x)
	require.NoError(t, err)
	hy, err := s.RegisterVector(y)
	require.NoError(t, err)
	require.NoError(t, s.Submit(ctx, first, RW(hx)))
	for !gpu.sleeping.Load() {
		if ctx.Err() != nil {
			t.Fatal("the GPU worker never slept with its task in flight")
		}
		runtime.Gosched()
	}
	require.NoError(t, s.Submit(ctx, second, RW(hy)))
	require.NoError(t, s.WaitAll(ctx))
}
