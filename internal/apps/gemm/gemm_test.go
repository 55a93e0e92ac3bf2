package gemm

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/internal/apps/tiled"
	"github.com/pzgo/pz/scheduler"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestRunEveryPolicy(t *testing.T) {
	for _, pol := range scheduler.Policies() {
		for _, prec := range []int{32, 64} {
			t.Run(fmt.Sprintf("%s/fp%d", pol, prec), func(t *testing.T) {
				opts := Options{N: 160, Block: 32, Precision: prec, Policy: pol, Workers: 2, Check: true, Seed: 3, Warmup: 1,
					SchedulerOptions: []scheduler.Option{scheduler.WithPerfModelDir(t.TempDir())}}
				res, err := Run(testCtx(t), opts, nil)
				require.NoError(t, err)
				assert.Equal(t, 25, res.Tasks)
				assert.True(t, res.Checked)
				assert.Less(t, res.MaxRelErr, Tolerance(prec, opts.N))
				assert.Greater(t, res.GFlops, 0.0)
				assert.Greater(t, res.Efficiency, 0.0)
			})
		}
	}
}

// Multiply against a float64 triple loop over every entry, with ragged
// sizes ruled out by the options check but a non-square tile grid.
func TestMultiplyAllEntries(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPerfModelDir(t.TempDir()))
	require.NoError(t, err)
	defer func() { assert.NoError(t, s.Close()) }()
	const n, b = 96, 16
	a, bm, c0 := tiled.Random[float64](n, n, 1), tiled.Random[float64](n, n, 2), tiled.Random[float64](n, n, 3)
	c := append([]float64(nil), c0...)
	_, err = Multiply(ctx, s, NewCodelet[float64](), a, bm, c, n, b, nil)
	require.NoError(t, err)
	for i := range n {
		for j := range n {
			want := c0[i*n+j]
			for k := range n {
				want -= a[i*n+k] * bm[j*n+k]
			}
			require.InDelta(t, want, c[i*n+j], 1e-12, "C[%d,%d]", i, j)
		}
	}
	// maxRelErr sees a wrong entry.
	assert.Less(t, maxRelErr(a, bm, c0, c, n, 1), 1e-14)
	c[5*n+7] += 1
	assert.Greater(t, maxRelErrAll(a, bm, c0, c, n), 1e-3)
}

// maxRelErrAll is maxRelErr over every entry (the sampled version may
// miss one wrong entry by design).
func maxRelErrAll(a, b, c0, c []float64, n int) float64 {
	worst := 0.0
	for i := range n {
		for j := range n {
			ref, mag := c0[i*n+j], 0.0
			for k := range n {
				ref -= a[i*n+k] * b[j*n+k]
				mag += abs(a[i*n+k] * b[j*n+k])
			}
			worst = max(worst, abs(c[i*n+j]-ref)/(mag+abs(c0[i*n+j])))
		}
	}
	return worst
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestRunBadOptions(t *testing.T) {
	_, err := Run(testCtx(t), Options{N: 100, Block: 64}, nil)
	assert.True(t, errors.Is(err, tiled.ErrBadOptions), "%v", err)
}

// A product that cannot fit is refused before anything is allocated (it
// panicked in makeslice), naming the size it needs; so is a distributed
// one, counted for the ranks that share the host.
func TestRunRefusesMatrixBeyondMemory(t *testing.T) {
	_, err := Run(testCtx(t), Options{N: 10_000_000, Block: 1000}, nil)
	require.ErrorIs(t, err, tiled.ErrBadOptions)
	assert.Contains(t, err.Error(), "gemm: n=10000000: ")
	assert.Contains(t, err.Error(), "needs at least 1.4 PiB of memory (4 matrices of 10000000×10000000 fp32 values")
	// Distributed, a rank holds its share of A's and B's panels and C's
	// tiles and, on the root with Check, A, B, C's start and C whole.
	const gib, mib = 1 << 30, 1 << 20
	o := Options{N: 16384, Block: 1024, Precision: 32} // 1 GiB a matrix
	assert.NoError(t, checkDistMemory(o, 2, 2, true, 3*gib), "2 x 3/2 matrices")
	err = checkDistMemory(o, 2, 2, false, 3071*mib)
	require.ErrorIs(t, err, tiled.ErrBadOptions)
	assert.Contains(t, err.Error(), "needs at least 3.0 GiB of memory (2 rank(s) here, each with its share of A's and B's panels and C's tiles (16384×16384 fp32))")
	assert.NoError(t, checkDistMemory(o, 64, 16, false, 768*mib), "16 of 64 ranks here: a quarter of 3 matrices")
	assert.ErrorIs(t, checkDistMemory(o, 64, 16, false, 767*mib), tiled.ErrBadOptions)
	o.Check = true
	assert.NoError(t, checkDistMemory(o, 2, 2, true, 7*gib), "the root also holds 4 matrices")
	err = checkDistMemory(o, 2, 2, true, 7167*mib)
	require.ErrorIs(t, err, tiled.ErrBadOptions, "the root generates A, B and C's start and collects C")
	assert.Contains(t, err.Error(), "; on rank 0, A, B, C's start and the collected C)")
	assert.NoError(t, checkDistMemory(o, 2, 2, false, 3*gib), "not on the root's host")
}
