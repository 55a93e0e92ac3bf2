package cuda_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
)

func TestNoDriverMeansZeroDevices(t *testing.T) {
	d, err := cuda.Open()
	if err == nil {
		n, err := d.DeviceCount()
		require.NoError(t, err)
		t.Logf("a CUDA driver is present (version %d, %d devices): the no-driver case is covered by the nil Driver below", d.Version(), n)
	} else {
		require.ErrorIs(t, err, cuda.ErrNoDriver, "the only error without a driver is ErrNoDriver")
		assert.True(t, cuda.IsNoDriver(err))
		assert.Nil(t, d)
	}

	var none *cuda.Driver
	n, err := none.DeviceCount()
	require.NoError(t, err)
	assert.Zero(t, n)
	devs, err := none.Devices()
	require.NoError(t, err)
	assert.Empty(t, devs)
	assert.Zero(t, none.Version())
	_, err = none.NewContext(context.Background(), 0)
	require.ErrorIs(t, err, cuda.ErrNoDriver)
	_, err = none.Device(0)
	require.ErrorIs(t, err, cuda.ErrNoDriver)
	_, err = none.Attribute(0, cuda.AttrMultiprocessorCount)
	require.ErrorIs(t, err, cuda.ErrNoDriver)
}

func TestOpenLibraryMissing(t *testing.T) {
	_, err := cuda.OpenLibrary("/nonexistent/libcuda.so.1")
	require.ErrorIs(t, err, cuda.ErrNoDriver)
}

// TestOpenLibraryWithoutCUDA loads a real shared library that is not the
// CUDA driver: dlopen works, the entry points are missing.
func TestOpenLibraryWithoutCUDA(t *testing.T) {
	d, err := cuda.OpenLibrary("libc.so.6")
	if err != nil && !errors.Is(err, cuda.ErrNoDriver) {
		t.Fatalf("unexpected error: %v", err)
	}
	require.Nil(t, d)
	require.ErrorIs(t, err, cuda.ErrNoDriver)
	if err.Error() == cuda.ErrNoDriver.Error()+": libc.so.6: cannot open shared object file: No such file or directory" {
		t.Skip("no libc.so.6 on this system")
	}
	assert.Contains(t, err.Error(), "lacks cuInit")
}

func TestResultsAndErrors(t *testing.T) {
	assert.Equal(t, "CUDA_ERROR_INVALID_CONTEXT", cuda.ErrInvalidContext.Name())
	assert.Equal(t, "cuda: CUDA_ERROR_OUT_OF_MEMORY", cuda.ErrOutOfMemory.Error())
	assert.Equal(t, "CUDA_ERROR_12345", cuda.Result(12345).Name())

	e := &cuda.Error{Call: "cuMemAlloc_v2", Code: cuda.ErrOutOfMemory, Description: "out of memory"}
	var err error = fmt.Errorf("alloc 1 GiB: %w", e)
	assert.ErrorIs(t, err, cuda.ErrOutOfMemory)
	assert.NotErrorIs(t, err, cuda.ErrInvalidContext)
	var ce *cuda.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "cuMemAlloc_v2", ce.Call)
	assert.Equal(t, "alloc 1 GiB: cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory", err.Error())

	withLog := &cuda.Error{Call: "cuModuleLoadDataEx", Code: cuda.ErrInvalidPTX, Name: "CUDA_ERROR_INVALID_PTX", Log: "ptxas fatal"}
	assert.Equal(t, "cuda: cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX (218)\nptxas fatal", withLog.Error())
}

func TestBytesAndSlice(t *testing.T) {
	f := []float32{1, -2.5, 3}
	b := cuda.Bytes(f)
	require.Len(t, b, 12)
	back := cuda.Slice[float32](b)
	assert.Equal(t, f, back)
	back[1] = 7 // aliases the original
	assert.Equal(t, float32(7), f[1])

	assert.Nil(t, cuda.Bytes([]float64(nil)))
	assert.Nil(t, cuda.Slice[float64](make([]byte, 7)))
	assert.Len(t, cuda.Slice[uint32](cuda.Bytes(make([]uint64, 2))[:10]), 2, "trailing bytes are dropped")

	words := make([]uint64, 2)
	raw := cuda.Bytes(words)
	assert.Panics(t, func() { _ = cuda.Slice[uint32](raw[1:]) }, "misaligned")
}

// TestArgumentValidation checks the errors returned before any driver
// call, so it needs no GPU (the zero Context is never reached).
func TestArgumentValidation(t *testing.T) {
	ctx := context.Background()
	c := &cuda.Context{}
	var s *cuda.Stream
	checks := map[string]error{
		"Alloc(0)":          func() error { _, err := c.Alloc(ctx, 0); return err }(),
		"Alloc(-1)":         func() error { _, err := c.Alloc(ctx, -1); return err }(),
		"AllocHost(0)":      func() error { _, err := c.AllocHost(ctx, 0); return err }(),
		"FreeHost(nil)":     c.FreeHost(ctx, nil),
		"CopyDtoD(-1)":      c.CopyDtoD(ctx, 1, 2, -1),
		"Memset8(-1)":       c.Memset8(ctx, 1, 0, -1),
		"LoadModule(empty)": func() error { _, err := c.LoadModule(ctx, nil); return err }(),
		"Launch(nil)":       c.Launch(ctx, nil, cuda.Dim3{X: 1}, cuda.Dim3{X: 1}, 0, nil),
		"ElapsedTime(nil)":  func() error { _, err := c.ElapsedTime(ctx, nil, nil); return err }(),
		"nil Synchronize":   s.Synchronize(ctx),
		"nil Destroy":       s.Destroy(ctx),
	}
	for name, err := range checks {
		assert.ErrorIs(t, err, cuda.ErrBadArgument, name)
	}
	// Empty copies are no-ops.
	assert.NoError(t, c.CopyHtoD(ctx, 1, nil))
	assert.NoError(t, c.CopyDtoH(ctx, nil, 1))
	assert.NoError(t, c.CopyHtoDAsync(ctx, 1, nil, nil))
	assert.NoError(t, c.CopyDtoHAsync(ctx, nil, 1, nil))
}
