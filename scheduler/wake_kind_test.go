package scheduler

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
