package cuda_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
)

// TestGPUGreenContext splits device 0's SMs in two with the real driver,
// runs vadd on a green context over one half, on its stream and on its
// default stream, over memory the primary context allocated, and reads
// the partition back. Without a GPU it skips, and with a driver older
// than CUDA 12.4 (or a device without green contexts) it says so and
// skips. Only what the driver documents is asserted: the parts are equal
// and disjoint, the rounding is the driver's.
func TestGPUGreenContext(t *testing.T) {
	ctx, c := openContext(t)
	d := c.Driver()
	all, err := d.SMs(0)
	if errors.Is(err, cuda.ErrNotSupported) {
		t.Skipf("no green contexts (driver version %d): %v", d.Version(), err)
	}
	require.NoError(t, err)
	mp, err := d.Attribute(0, cuda.AttrMultiprocessorCount)
	require.NoError(t, err)
	require.Equal(t, mp, all.Count())
	primarySMs, err := c.SMs(ctx)
	require.NoError(t, err)
	require.Equal(t, all.Count(), primarySMs.Count())

	parts, rest, err := d.SplitSMs(all, 2, 1)
	if errors.Is(err, cuda.ErrNotSupported) {
		t.Skipf("the device cannot be split: %v", err)
	}
	require.NoError(t, err)
	require.Len(t, parts, 2)
	require.Positive(t, parts[0].Count())
	require.Equal(t, parts[0].Count(), parts[1].Count(), "symmetrical partitions")
	require.Equal(t, all.Count(), 2*parts[0].Count()+rest.Count())
	t.Logf("%d SMs: 2 groups of %d, %d left", all.Count(), parts[0].Count(), rest.Count())

	g, err := d.NewGreenContext(ctx, 0, parts[0])
	require.NoError(t, err)
	defer func() { assert.NoError(t, g.Close()) }()
	require.NotZero(t, g.GreenHandle())
	sms, err := g.SMs(ctx)
	require.NoError(t, err)
	require.Equal(t, parts[0].Count(), sms.Count())

	const n = 1<<20 + 3
	a, b := hostInputs(3, n), hostInputs(4, n)
	var dev [3]cuda.DevicePtr
	for i := range dev {
		dev[i], err = c.Alloc(ctx, 4*n)
		require.NoError(t, err)
		defer func() { assert.NoError(t, c.Free(ctx, dev[i])) }()
	}
	require.NoError(t, c.CopyHtoD(ctx, dev[0], cuda.Bytes(a)))
	require.NoError(t, c.CopyHtoD(ctx, dev[1], cuda.Bytes(b)))
	require.NoError(t, c.Synchronize(ctx))

	mod, err := g.LoadPTX(ctx, testPTX)
	require.NoError(t, err)
	defer func() { assert.NoError(t, mod.Unload(ctx)) }()
	vadd, err := mod.Function(ctx, "vadd")
	require.NoError(t, err)
	s, err := g.NewStream(ctx)
	require.NoError(t, err)
	defer func() { assert.NoError(t, s.Destroy(ctx)) }()
	grid, block := cuda.Dim3{X: (n + 255) / 256}, cuda.Dim3{X: 256}
	for _, stream := range []*cuda.Stream{s, nil} {
		require.NoError(t, c.Memset8(ctx, dev[2], 0xff, 4*n)) // NaNs: vadd must overwrite them
		require.NoError(t, c.Synchronize(ctx))
		require.NoError(t, g.Launch(ctx, vadd, grid, block, 0, stream, dev[0], dev[1], dev[2], uint32(n)))
		require.NoError(t, g.Synchronize(ctx))
		got := make([]float32, n)
		require.NoError(t, c.CopyDtoH(ctx, cuda.Bytes(got), dev[2]))
		for i := range n {
			if want := a[i] + b[i]; got[i] != want {
				t.Fatalf("stream %v: c[%d] = %v, want %v", stream != nil, i, got[i], want)
			}
		}
	}
}
