package cholesky_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/apps/cholesky"
	"github.com/pzgo/pz/internal/apps/tiled"
	"github.com/pzgo/pz/internal/fakecuda"
	"github.com/pzgo/pz/internal/linalg"
	"github.com/pzgo/pz/scheduler"
)

// fakeGPU loads a fresh instance of the stand-in driver (internal/fakecuda,
// which also stands in for cuBLAS and cuSOLVER) with one GPU of memory
// bytes, and points the libraries' variables at it.
func fakeGPU(t *testing.T, memory int64) *cuda.Driver {
	t.Helper()
	fakecuda.SetDelay(t, 0)
	d, lib := fakecuda.Open(t, 1, memory)
	fakecuda.SetLibraries(t, lib)
	return d
}

// TestGPUKernels factors on CPU and GPU workers together, and on the GPU
// alone out of core, in both precisions, and checks the residual: the
// row-major tiles reach the column-major libraries as their transposes.
func TestGPUKernels(t *testing.T) {
	for _, c := range []struct {
		name       string
		precision  int
		memory     int64
		deviceOnly bool
		matrix     bool // MatrixLayout: the whole matrix pinned, tiles with a leading dimension
	}{
		{"hybrid f64", 64, 64 << 20, false, false},
		{"hybrid f32", 32, 64 << 20, false, false},
		{"gpu only out of core f64", 64, 160 << 10, true, false}, // 512 KiB of tiles, 5 of 32 KiB fit
		{"gpu only f32", 32, 64 << 20, true, false},
		{"gpu only matrix layout f64", 64, 160 << 10, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			d := fakeGPU(t, c.memory)
			r, err := cholesky.Run(ctx, cholesky.Options{
				N: 256, Block: 64, Precision: c.precision, Workers: 1, Check: true, DeviceOnly: c.deviceOnly, MatrixLayout: c.matrix,
				SchedulerOptions: []scheduler.Option{scheduler.WithCUDA(1), scheduler.WithCUDADriver(d), scheduler.WithPerfModelDir(t.TempDir())},
			}, nil)
			require.NoError(t, err)
			require.Less(t, r.Residual, cholesky.Tolerance(c.precision, 256))
			require.Equal(t, 1, r.Devices.Devices)
			require.True(t, r.Devices.Pinned)
			// How a hybrid run splits the tasks is the policy's choice;
			// GPU-only runs every task on the GPU.
			if c.deviceOnly {
				require.EqualValues(t, r.Tasks, r.Devices.DeviceTasks)
			}
			if c.memory < 512<<10 {
				require.Positive(t, r.Devices.WriteBacks, "out of core: tiles written back")
			}
		})
	}
}

// TestGPUNotPositiveDefinite: cuSOLVER's status reaches the task's error.
func TestGPUNotPositiveDefinite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := fakeGPU(t, 64<<20)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	defer s.Close()
	g, err := tiled.OpenGPU()
	require.NoError(t, err)
	cl := cholesky.NewCodelets[float64]()
	cl.Potrf.CPU = nil // the GPU's POTRF only
	cl = cholesky.WithGPU[float64](cl, g)
	a := make([]float64, 64*64)
	for i := range 64 {
		a[i*64+i] = 1
	}
	a[10*64+10] = -1
	_, err = cholesky.Factor(ctx, s, cl, a, 64, 64, nil)
	require.ErrorIs(t, err, linalg.ErrNotPositiveDefinite)
	require.Contains(t, err.Error(), "leading minor 11")
	require.NoError(t, g.Close())
}
