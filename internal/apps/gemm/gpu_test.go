package gemm

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/internal/apps/tiled"
	"github.com/pzgo/pz/internal/fakecuda"
	"github.com/pzgo/pz/scheduler"
)

// TestMultiplyOnGPU runs every tile product through cuBLAS on the
// stand-in driver (internal/fakecuda), whose GPU holds a third of the
// panels and tiles, and compares every entry with the triple loop.
func TestMultiplyOnGPU(t *testing.T) {
	ctx := testCtx(t)
	fakecuda.SetDelay(t, 0)
	d, lib := fakecuda.Open(t, 1, 64<<10)
	fakecuda.SetLibraries(t, lib)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithCUDA(1), scheduler.WithCUDADriver(d), scheduler.WithPerfModelDir(t.TempDir()))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	g, err := tiled.OpenGPU()
	require.NoError(t, err)
	cl := NewCodelet[float64]()
	cl.CPU, cl.CUDA = nil, tiled.GemmCUDA[float64](g) // the GPU only

	const n, b = 96, 16 // panels of 12 KiB, tiles of 2 KiB
	a, bm, c0 := tiled.Random[float64](n, n, 1), tiled.Random[float64](n, n, 2), tiled.Random[float64](n, n, 3)
	c := append([]float64(nil), c0...)
	_, err = Multiply(ctx, s, cl, a, bm, c, n, b, nil)
	require.NoError(t, err)
	require.NoError(t, g.Close())
	require.Less(t, maxRelErrAll(a, bm, c0, c, n), 1e-13)
	figs := tiled.DeviceFigures(s)
	require.EqualValues(t, (n/b)*(n/b), figs.DeviceTasks)
	require.Positive(t, figs.Evictions, "the panels do not all fit")
}
