package cuda_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
)

// These tests run green contexts against the stand-in driver, whose
// devices have 16 SMs here and split them as compute capability 9.0
// does: groups of at least 8 SMs, a multiple of 8.

const greenSMs = 16

// openGreen loads a fresh stand-in with devices GPUs of greenSMs SMs and
// returns its driver, its library path and a context.Context with a
// deadline (so that the Synchronize methods poll).
func openGreen(t *testing.T, devices int) (context.Context, *cuda.Driver, string) {
	t.Helper()
	fakecuda.SetSMs(t, greenSMs)
	d, lib := fakecuda.Open(t, devices, 16<<20)
	ctx, cancel := context.WithTimeout(context.Background(), fakeTimeout)
	t.Cleanup(cancel)
	return ctx, d, lib
}

// halves splits device ordinal's SMs into two groups of 8.
func halves(t *testing.T, d *cuda.Driver, ordinal int) []cuda.SMResource {
	t.Helper()
	all, err := d.SMs(ordinal)
	require.NoError(t, err)
	parts, rest, err := d.SplitSMs(all, 2, 8)
	require.NoError(t, err)
	require.Len(t, parts, 2)
	require.Zero(t, rest.Count())
	return parts
}

// newGreen creates a green Context, closed at the end of the test.
func newGreen(t *testing.T, ctx context.Context, d *cuda.Driver, ordinal int, sms ...cuda.SMResource) *cuda.Context {
	t.Helper()
	g, err := d.NewGreenContext(ctx, ordinal, sms...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, g.Close()) })
	return g
}

func fakeStats(t *testing.T, lib string) fakecuda.Counters {
	t.Helper()
	st, err := fakecuda.Stats(lib)
	require.NoError(t, err)
	return st
}

// TestSplitSMs splits a device's 16 SMs: minCount is rounded up to the
// granularity (8), the parts get the rounded count and the rest what is
// left.
func TestSplitSMs(t *testing.T) {
	_, d, _ := openGreen(t, 2)
	all, err := d.SMs(1)
	require.NoError(t, err)
	require.Equal(t, greenSMs, all.Count())
	require.Equal(t, 1, all.Ordinal())
	require.Equal(t, "cuda1: 16 SMs", all.String())
	mp, err := d.Attribute(1, cuda.AttrMultiprocessorCount)
	require.NoError(t, err)
	require.Equal(t, mp, all.Count(), "the SM resource is the multiprocessor count")

	for _, tc := range []struct {
		groups, minCount int
		want, rest       int
	}{
		{2, 8, 8, 0},
		{2, 5, 8, 0},  // rounded up to the granularity
		{1, 1, 8, 8},  // the smallest group
		{1, 9, 16, 0}, // rounded up to a multiple of 8
	} {
		parts, rest, err := d.SplitSMs(all, tc.groups, tc.minCount)
		require.NoError(t, err, "%+v", tc)
		require.Len(t, parts, tc.groups, "%+v", tc)
		for i, p := range parts {
			assert.Equal(t, tc.want, p.Count(), "%+v: part %d", tc, i)
			assert.Equal(t, 1, p.Ordinal(), "%+v: part %d", tc, i)
		}
		assert.Equal(t, tc.rest, rest.Count(), "%+v: rest", tc)
	}
}

// TestSplitSMsBadInput checks the errors of SplitSMs: arguments refused
// before the driver is called, splits the driver cannot make after
// rounding, and resources it refuses to split.
func TestSplitSMsBadInput(t *testing.T) {
	_, d, _ := openGreen(t, 1)
	all, err := d.SMs(0)
	require.NoError(t, err)
	parts, _, err := d.SplitSMs(all, 1, 8)
	require.NoError(t, err)

	for _, tc := range []struct {
		name             string
		r                cuda.SMResource
		groups, minCount int
		want             error
	}{
		{"no groups", all, 0, 1, cuda.ErrBadArgument},
		{"minCount 0", all, 1, 0, cuda.ErrBadArgument},
		{"negative minCount", all, 1, -8, cuda.ErrBadArgument},
		{"no SMs", cuda.SMResource{}, 1, 1, cuda.ErrBadArgument},
		{"more groups than SMs", all, greenSMs + 1, 1, cuda.ErrTooFewSMs},
		{"minCount above the count", all, 1, greenSMs + 1, cuda.ErrTooFewSMs},
		{"groups*minCount above the count", all, 4, 5, cuda.ErrTooFewSMs},
		{"too few after rounding", all, 3, 5, cuda.ErrTooFewSMs}, // 3 groups of 8 do not fit
		{"a part split again", parts[0], 1, 1, cuda.ErrInvalidResourceConfig},
	} {
		got, rest, err := d.SplitSMs(tc.r, tc.groups, tc.minCount)
		require.ErrorIs(t, err, tc.want, tc.name)
		assert.Nil(t, got, tc.name)
		assert.Zero(t, rest.Count(), tc.name)
	}
	_, _, err = d.SplitSMs(all, 3, 5)
	require.ErrorIs(t, err, cuda.ErrBadArgument, "ErrTooFewSMs is a bad argument")
	require.ErrorContains(t, err, "2 groups fit")
	_, _, err = d.SplitSMs(parts[0], 1, 1)
	var ce *cuda.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "cuDevSmResourceSplitByCount", ce.Call)
}

// TestGreenContextRunsOnPartition runs kernels on a green Context of 8
// of the device's 16 SMs, over memory that a primary Context allocated:
// the stand-in counts them under 8 SMs, the primary Context's kernels
// under none, and the memory is shared both ways.
func TestGreenContextRunsOnPartition(t *testing.T) {
	ctx, d, lib := openGreen(t, 1)
	primary, err := d.NewContext(ctx, 0)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, primary.Close()) })
	parts := halves(t, d, 0)
	green := newGreen(t, ctx, d, 0, parts[0])
	require.Equal(t, uint64(1), fakeStats(t, lib).GreenContexts)

	require.NotZero(t, green.GreenHandle())
	require.Zero(t, primary.GreenHandle())
	require.NotEqual(t, primary.Handle(), green.Handle())
	require.Equal(t, 0, green.Ordinal())
	sms, err := green.SMs(ctx)
	require.NoError(t, err)
	require.Equal(t, 8, sms.Count(), "the green context's share")
	sms, err = primary.SMs(ctx)
	require.NoError(t, err)
	require.Equal(t, greenSMs, sms.Count(), "the primary context has them all")

	const n = 1024
	p, err := primary.Alloc(ctx, 8*n)
	require.NoError(t, err)
	defer func() { assert.NoError(t, primary.Free(ctx, p)) }()
	s := fakeStream(t, ctx, green)
	defer func() { assert.NoError(t, s.Destroy(ctx)) }()
	f := fakeKernel(t, ctx, green, "pz_fill_f64")
	require.NoError(t, fill(ctx, green, f, p, 2.5, n, s), "memory of the primary context")
	require.NoError(t, s.Synchronize(ctx))
	out := make([]float64, n)
	require.NoError(t, primary.CopyDtoH(ctx, cuda.Bytes(out), p))
	for i, v := range out {
		require.Equal(t, 2.5, v, "element %d", i)
	}
	st := fakeStats(t, lib)
	require.Equal(t, map[int]uint64{8: 1}, st.GreenKernels, "the kernel ran on the green context's 8 SMs")
	require.Equal(t, uint64(1), st.Kernels)

	// The default stream of the green context runs on its SMs too.
	require.NoError(t, fill(ctx, green, f, p, 3, n, nil))
	require.NoError(t, green.Synchronize(ctx))
	// A kernel of the primary context is no green context's.
	fp := fakeKernel(t, ctx, primary, "pz_fill_f64")
	ps := fakeStream(t, ctx, primary)
	defer func() { assert.NoError(t, ps.Destroy(ctx)) }()
	require.NoError(t, fill(ctx, primary, fp, p, 4, n, ps))
	require.NoError(t, primary.Synchronize(ctx), "waits for the green context's streams too")
	st = fakeStats(t, lib)
	require.Equal(t, map[int]uint64{8: 2}, st.GreenKernels)
	require.Equal(t, uint64(3), st.Kernels)

	// Memory allocated through the green Context is the device's.
	q, err := green.Alloc(ctx, 8*n)
	require.NoError(t, err)
	require.NoError(t, fill(ctx, primary, fp, q, 5, n, ps))
	require.NoError(t, ps.Synchronize(ctx))
	require.NoError(t, green.CopyDtoH(ctx, cuda.Bytes(out), q))
	require.Equal(t, 5.0, out[n-1])
	require.NoError(t, primary.Free(ctx, q))

	// Modules and streams belong to the Context that made them.
	require.ErrorIs(t, fill(ctx, green, fp, p, 1, n, s), cuda.ErrInvalidHandle, "the primary context's kernel")
	require.ErrorIs(t, fill(ctx, green, f, p, 1, n, ps), cuda.ErrInvalidHandle, "the primary context's stream")
}

// TestGreenContextsInParallel runs two green Contexts on the two halves
// of a device at once, each with its own kernels and stream, and one over
// both halves.
func TestGreenContextsInParallel(t *testing.T) {
	ctx, d, lib := openGreen(t, 1)
	parts := halves(t, d, 0)
	const n, rounds = 256, 4
	var wg sync.WaitGroup
	errs := make([]error, len(parts))
	for i, part := range parts {
		g := newGreen(t, ctx, d, 0, part)
		f := fakeKernel(t, ctx, g, "pz_fill_f64")
		s := fakeStream(t, ctx, g)
		t.Cleanup(func() { assert.NoError(t, s.Destroy(ctx)) })
		p, err := g.Alloc(ctx, 8*n)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, g.Free(ctx, p)) })
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				if err := fill(ctx, g, f, p, float64(r), n, s); err != nil {
					errs[i] = err
					return
				}
			}
			errs[i] = s.Synchronize(ctx)
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.Equal(t, uint64(len(parts)), fakeStats(t, lib).GreenContexts)

	both := newGreen(t, ctx, d, 0, parts...)
	sms, err := both.SMs(ctx)
	require.NoError(t, err)
	require.Equal(t, greenSMs, sms.Count(), "two parts of one split")
	f := fakeKernel(t, ctx, both, "pz_fill_f64")
	p, err := both.Alloc(ctx, 8*n)
	require.NoError(t, err)
	require.NoError(t, fill(ctx, both, f, p, 1, n, nil))
	require.NoError(t, both.Free(ctx, p))
	require.Equal(t, map[int]uint64{8: 2 * rounds, greenSMs: 1}, fakeStats(t, lib).GreenKernels)
}

// TestGreenContextBadInput checks what NewGreenContext refuses before it
// calls the driver, and what the driver refuses.
func TestGreenContextBadInput(t *testing.T) {
	ctx, d, lib := openGreen(t, 2)
	parts0 := halves(t, d, 0)
	parts1 := halves(t, d, 1)
	other := halves(t, d, 0) // a second split of device 0

	for _, tc := range []struct {
		name    string
		ordinal int
		sms     []cuda.SMResource
		want    error
	}{
		{"no SMs", 0, nil, cuda.ErrBadArgument},
		{"an empty resource", 0, []cuda.SMResource{{}}, cuda.ErrBadArgument},
		{"another device's", 0, []cuda.SMResource{parts1[0]}, cuda.ErrBadArgument},
		{"mixed devices", 1, []cuda.SMResource{parts1[0], parts0[1]}, cuda.ErrBadArgument},
		{"two splits", 0, []cuda.SMResource{parts0[0], other[1]}, cuda.ErrInvalidResourceConfig},
		{"no such device", 5, parts0[:1], cuda.ErrInvalidDevice},
	} {
		g, err := d.NewGreenContext(ctx, tc.ordinal, tc.sms...)
		require.ErrorIs(t, err, tc.want, tc.name)
		require.Nil(t, g, tc.name)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err := d.NewGreenContext(done, 0, parts0[0])
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, fakeStats(t, lib).GreenContexts, "nothing was left behind")
}

// TestGreenContextClose checks that Close destroys the green context, is
// idempotent, and releases the primary context it held: with no other
// holder, the memory allocated through the green Context goes with it.
func TestGreenContextClose(t *testing.T) {
	ctx, d, lib := openGreen(t, 1)
	parts := halves(t, d, 0)
	g, err := d.NewGreenContext(ctx, 0, parts[1])
	require.NoError(t, err)
	_, err = g.Alloc(ctx, 4096) // never freed
	require.NoError(t, err)
	st := fakeStats(t, lib)
	require.Equal(t, uint64(1), st.GreenContexts)
	require.Equal(t, uint64(1), st.LiveAllocations)

	require.NoError(t, g.Close())
	require.NoError(t, g.Close(), "idempotent")
	_, err = g.SMs(ctx)
	require.ErrorIs(t, err, cuda.ErrClosed)
	_, err = g.Alloc(ctx, 64)
	require.ErrorIs(t, err, cuda.ErrClosed)
	st = fakeStats(t, lib)
	require.Zero(t, st.GreenContexts)
	require.Zero(t, st.LiveAllocations, "the last holder of the primary context released it")

	// The SMs can be used again.
	g = newGreen(t, ctx, d, 0, parts[1])
	sms, err := g.SMs(ctx)
	require.NoError(t, err)
	require.Equal(t, 8, sms.Count())
}

// TestGreenContextsNotSupported checks that a driver older than CUDA
// 12.4 opens and that the green context methods then return
// ErrNotSupported, and that a nil Driver has no devices to split.
func TestGreenContextsNotSupported(t *testing.T) {
	names := []string{
		"cuDeviceGetDevResource", "cuDevSmResourceSplitByCount", "cuDevResourceGenerateDesc",
		"cuGreenCtxCreate", "cuGreenCtxDestroy", "cuCtxFromGreenCtx", "cuCtxGetDevResource",
	}
	require.Subset(t, cuda.OptionalEntryPoints(), names)
	ctx, full, _ := openGreen(t, 1)
	all, err := full.SMs(0)
	require.NoError(t, err)

	d := cuda.WithoutEntryPoints(full, names...)
	c, err := d.NewContext(ctx, 0)
	require.NoError(t, err, "the rest works")
	defer func() { require.NoError(t, c.Close()) }()
	_, err = d.SMs(0)
	require.ErrorIs(t, err, cuda.ErrNotSupported)
	_, _, err = d.SplitSMs(all, 2, 8)
	require.ErrorIs(t, err, cuda.ErrNotSupported)
	_, err = d.NewGreenContext(ctx, 0, all)
	require.ErrorIs(t, err, cuda.ErrNotSupported)
	_, err = c.SMs(ctx)
	require.ErrorIs(t, err, cuda.ErrNotSupported)
	for _, name := range names[2:6] { // each one NewGreenContext needs
		_, err = cuda.WithoutEntryPoints(full, name).NewGreenContext(ctx, 0, all)
		require.ErrorIs(t, err, cuda.ErrNotSupported, name)
		require.ErrorContains(t, err, name)
	}

	var none *cuda.Driver
	_, err = none.SMs(0)
	require.ErrorIs(t, err, cuda.ErrNoDriver)
	_, _, err = none.SplitSMs(all, 1, 1)
	require.ErrorIs(t, err, cuda.ErrNoDriver)
	_, err = none.NewGreenContext(ctx, 0, all)
	require.ErrorIs(t, err, cuda.ErrNoDriver)
}
