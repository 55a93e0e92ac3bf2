package static

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
)

// A GPU runnable on a real CUDA stream: the submittee copies a frame to
// the device and back on the stream; the waiter finds it there. It skips
// where no GPU is present (TestCUDAStreamPipelineStandIn runs it on the
// stand-in driver).
func TestCUDAStreamPipeline(t *testing.T) {
	d, err := cuda.Open()
	if errors.Is(err, cuda.ErrNoDriver) {
		t.Skipf("no CUDA driver, GPU test skipped: %v", err)
	}
	require.NoError(t, err)
	if n, err := d.DeviceCount(); err != nil || n == 0 {
		t.Skip("no CUDA device, GPU test skipped")
	}
	cudaStreamPipeline(t, d)
}

// TestCUDAStreamPipelineStandIn runs the pipeline on the stand-in driver
// of internal/fakecuda, whose streams run their work on threads of their
// own after a delay: a waiter that did not wait for the mark would find
// the previous frame.
func TestCUDAStreamPipelineStandIn(t *testing.T) {
	d, lib := fakecuda.Open(t, 1, 16<<20)
	cudaStreamPipeline(t, d)
	st, err := fakecuda.Stats(lib)
	require.NoError(t, err)
	assert.Zero(t, st.InvalidContext)
	assert.Positive(t, st.HtoD)
}

func cudaStreamPipeline(t *testing.T, d *cuda.Driver) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cc, err := d.NewContext(ctx, 0)
	require.NoError(t, err)
	defer cc.Close()
	s, err := cc.NewStream(ctx)
	require.NoError(t, err)
	defer s.Destroy(ctx)
	stream, err := NewCUDAStream(ctx, cc, s, 4)
	require.NoError(t, err)
	defer stream.Close(ctx)
	const n = 1 << 20
	dev, err := cc.Alloc(ctx, n)
	require.NoError(t, err)
	defer cc.Free(ctx, dev)
	in, err := cc.AllocHost(ctx, n)
	require.NoError(t, err)
	defer cc.FreeHost(ctx, in)
	out, err := cc.AllocHost(ctx, n)
	require.NoError(t, err)
	defer cc.FreeHost(ctx, out)

	plan := loadPlan(t, "testdata/pipeline.yaml")
	for i := range plan.Hyperepochs[0].Epochs[0].Runnables {
		plan.Hyperepochs[0].Epochs[0].Runnables[i].Overrun = NoSkip
	}
	plan.Hash = plan.hash()
	frame := byte(0) // grab's own: frames 1, 2, ...
	cam, _ := NewClient("camera")
	cam.Runnable("grab", func(context.Context) error {
		frame++
		for i := range in {
			in[i] = frame
		}
		return nil
	})
	cam.Runnable("detect_submit", func(context.Context) error { return nil })
	cam.Runnable("detect", func(ctx context.Context) error {
		if err := cc.CopyHtoDAsync(ctx, dev, in, s); err != nil {
			return err
		}
		return cc.CopyDtoHAsync(ctx, out, dev, s)
	})
	cam.Resource("gpu0.stream0", stream)
	pl, _ := NewClient("planner")
	bad, k := 0, byte(0)
	pl.Runnable("plan", func(context.Context) error {
		// Frame k's copy has come back (a later one may already have,
		// if grab ran ahead: nothing orders it after plan).
		k++
		if out[0] < k || out[n-1] < k {
			bad++
		}
		return nil
	})
	run, err := runLocal(ctx, plan, []*Client{cam, pl}, WithFrames(50))
	require.NoError(t, err)
	assert.Zero(t, bad, "plan saw a frame the GPU had not finished")
	for _, rr := range run.Runnables {
		assert.Len(t, rr.Seq, 50, rr.Name)
		for i, f := range rr.Flags {
			assert.Zero(t, f&FlagError, "%s frame %d: %v", rr.Name, i, rr.Errors)
		}
	}
}
