package tiled

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/internal/linalg"
	"github.com/pzgo/pz/logger"
	"github.com/pzgo/pz/runtimeview"
)

func TestCheckShape(t *testing.T) {
	cases := []struct {
		n, b, p int
		ok      bool
	}{
		{256, 64, 32, true}, {256, 256, 64, true}, {0, 1, 32, false}, {256, 0, 32, false},
		{256, 512, 32, false}, {250, 64, 32, false}, {256, 64, 16, false},
	}
	for i, c := range cases {
		err := CheckShape(c.n, c.b, c.p)
		if c.ok {
			assert.NoError(t, err, "case %d", i)
		} else {
			assert.True(t, errors.Is(err, ErrBadOptions), "case %d: %v", i, err)
		}
	}
}

func TestSPDFactors(t *testing.T) {
	for _, n := range []int{1, 7, 100} {
		a := SPD[float64](n, 3)
		for i := range n {
			for j := range n {
				require.Equal(t, a[i*n+j], a[j*n+i], "symmetric")
			}
		}
		assert.NoError(t, linalg.Potrf(n, a, n), "n=%d", n)
	}
	assert.Equal(t, SPD[float32](50, 9), SPD[float32](50, 9), "same seed, same matrix")
	assert.NotEqual(t, SPD[float32](50, 9), SPD[float32](50, 10), "other seed, other matrix")
}

func TestRandomRange(t *testing.T) {
	a := Random[float32](30, 40, 1)
	require.Len(t, a, 1200)
	for _, v := range a {
		require.True(t, v >= -1 && v < 1, "%v out of range", v)
	}
}

func TestTimeKernel(t *testing.T) {
	calls, preps := 0, 0
	d, err := TimeKernel(context.Background(), 5, 0, func() { preps++ }, func() { calls++; time.Sleep(time.Millisecond) })
	require.NoError(t, err)
	assert.Equal(t, 5, calls)
	assert.Equal(t, 5, preps)
	assert.GreaterOrEqual(t, d, time.Millisecond)
	assert.InDelta(t, 2.0, GFlops(2e9, time.Second), 1e-12)
}

// TestTimeKernelStops: a Ctrl-C during the timing ends it at the next
// call, and a long kernel is timed once, not minReps times. Found
// running pzrun cholesky -n 8192 -b 8192 in the new-user trial: before
// the factorization it timed five calls of each tile kernel on 8192
// tiles, minutes of silence that a SIGTERM did not end.
func TestTimeKernelStops(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("pzrun: interrupt received")
	calls := 0
	_, err := TimeKernel(ctx, 5, 0, nil, func() {
		calls++
		if calls == 2 {
			cancel(stop)
		}
	})
	require.ErrorIs(t, err, stop)
	assert.Equal(t, 2, calls, "no call after the cancel")

	defer func(m time.Duration) { MaxKernelTiming = m }(MaxKernelTiming)
	MaxKernelTiming = time.Nanosecond // every call is a long one
	calls = 0
	d, err := TimeKernel(context.Background(), 5, time.Hour, nil, func() { calls++; time.Sleep(time.Microsecond) })
	require.NoError(t, err)
	assert.Equal(t, 1, calls)
	assert.Positive(t, d)
}

func TestPrepareGrid(t *testing.T) {
	p, q := 0, 0
	require.NoError(t, PrepareGrid(6, &p, &q))
	assert.Equal(t, 6, p*q)
	p, q = 2, 2
	assert.ErrorIs(t, PrepareGrid(3, &p, &q), ErrBadOptions, "a 2x2 grid on 3 ranks")
	p, q = 1, 3
	assert.NoError(t, PrepareGrid(3, &p, &q))
}

// CheckMemory refuses, naming both sizes, a run that needs more than is
// available, and one no process could allocate when the memory is
// unknown; MatrixBytes does not overflow for an absurd order.
func TestCheckMemory(t *testing.T) {
	huge := 3 * MatrixBytes(10_000_000, 32) // 1.2e15 bytes
	assert.InDelta(t, 1.2e15, huge, 1)
	err := CheckMemory(huge, "3 matrices", 16<<30)
	require.ErrorIs(t, err, ErrBadOptions)
	assert.Contains(t, err.Error(), "needs at least 1.1 PiB of memory (3 matrices), more than the 16.0 GiB available here")
	err = CheckMemory(huge, "3 matrices", 0)
	require.ErrorIs(t, err, ErrBadOptions, "unknown memory: still beyond any process")
	assert.Contains(t, err.Error(), "more than a process can address")
	assert.NoError(t, CheckMemory(MatrixBytes(1024, 64), "one matrix", 16<<30))
	assert.NoError(t, CheckMemory(MatrixBytes(1024, 64), "one matrix", 0))
	assert.Equal(t, "8.0 MiB", FormatBytes(MatrixBytes(1024, 64)))
	assert.Equal(t, "512 B", FormatBytes(512))
}

// AvailableMemory reads this machine's memory: some, and no more than
// it has.
func TestAvailableMemory(t *testing.T) {
	assert.Positive(t, AvailableMemory(context.Background()))
}

// A tile is a rows×cols block at (r0, c0).
type tileAt struct{ r0, c0, rows, cols int }

// refRandom and refSPD are the matrices' entries one at a time, from the
// definition: what the tile and whole-matrix generators must agree with.
func refRandom[T linalg.Float](seed uint64, i, j int) T {
	shift, scale := unit[T]()
	return T(draw(rowState(seed, randomStream, i), j, shift, scale))
}

func refSPD[T linalg.Float](n int, seed uint64, i, j int) T {
	shift, scale := unit[T]()
	if i < j {
		i, j = j, i
	}
	v := draw(rowState(seed, spdStream, i), j, shift, scale)
	if i == j {
		v += float64(n)
	}
	return T(v)
}

// sentinel marks dst's values outside the tile, which a tile generator
// must leave alone.
const sentinel = 42

// checkTiles checks that whole (rows×cols, row-major) holds ref's entries
// and that each tile, generated alone with gen into a buffer whose stride
// exceeds the tile's width, equals the same part of whole, bit for bit,
// and writes nothing else.
func checkTiles[T linalg.Float](t *testing.T, whole []T, rows, cols int, ref func(i, j int) T, tiles []tileAt, gen func(dst []T, stride int, at tileAt)) {
	t.Helper()
	require.Len(t, whole, rows*cols)
	for i := range rows {
		for j := range cols {
			require.Equal(t, ref(i, j), whole[i*cols+j], "whole matrix entry (%d, %d)", i, j)
		}
	}
	for k, at := range tiles {
		stride := at.cols + 3
		dst := make([]T, at.rows*stride+2)
		for i := range dst {
			dst[i] = sentinel
		}
		gen(dst, stride, at)
		for i := range at.rows {
			for j := range stride {
				got := dst[i*stride+j]
				if j >= at.cols {
					require.Equal(t, T(sentinel), got, "tile %d %+v: padding (%d, %d) written", k, at, i, j)
					continue
				}
				require.Equal(t, whole[(at.r0+i)*cols+at.c0+j], got, "tile %d %+v: entry (%d, %d)", k, at, i, j)
			}
		}
		assert.Equal(t, []T{sentinel, sentinel}, dst[at.rows*stride:], "tile %d %+v: past the end", k, at)
	}
}

// Every tile of the SPD and Random matrices generated alone equals the
// same part of the whole matrix, in both precisions, for tiles below, on,
// above and across the diagonal, at several orders and seeds.
func TestTilesEqualWhole(t *testing.T) {
	t.Run("float32", testTilesEqualWhole[float32])
	t.Run("float64", testTilesEqualWhole[float64])
}

func testTilesEqualWhole[T linalg.Float](t *testing.T) {
	for _, seed := range []uint64{1, 2, 0x9e3779b97f4a7c15} {
		for _, n := range []int{1, 13, 64} {
			tiles := []tileAt{{0, 0, n, n}, {n / 2, n / 2, n - n/2, n - n/2}, {0, n - 1, n, 1}, {n - 1, 0, 1, n}, {0, 0, 0, 0}}
			if n >= 13 {
				tiles = append(tiles,
					tileAt{5, 5, 3, 3},   // on the diagonal
					tileAt{2, 4, 5, 6},   // across it
					tileAt{9, 1, 4, 3},   // below
					tileAt{1, 8, 3, 5},   // above
					tileAt{12, 12, 1, 1}, // one diagonal entry
					tileAt{3, 0, 0, 5},   // no rows
				)
			}
			t.Run(fmt.Sprintf("SPD/n=%d/seed=%d", n, seed), func(t *testing.T) {
				checkTiles(t, SPD[T](n, seed), n, n, func(i, j int) T { return refSPD[T](n, seed, i, j) }, tiles,
					func(dst []T, stride int, at tileAt) { SPDTile(dst, stride, n, seed, at.r0, at.c0, at.rows, at.cols) })
			})
			// Random is not square: n rows, n+5 columns.
			t.Run(fmt.Sprintf("Random/n=%d/seed=%d", n, seed), func(t *testing.T) {
				rt := slices.Concat(tiles, []tileAt{{0, n, n, 5}, {n - 1, 2, 1, n + 3}})
				checkTiles(t, Random[T](n, n+5, seed), n, n+5, func(i, j int) T { return refRandom[T](seed, i, j) }, rt,
					func(dst []T, stride int, at tileAt) { RandomTile(dst, stride, seed, at.r0, at.c0, at.rows, at.cols) })
			})
		}
	}
}

// A float32 matrix is the float64 one truncated to float32's 24 bits, so
// the two precisions factor the same matrix up to rounding; entries of
// both lie in [-1, 1) and look uniform.
func TestRandomPrecisions(t *testing.T) {
	const n = 256
	a64, a32 := Random[float64](n, n, 7), Random[float32](n, n, 7)
	var sum, sq float64
	for i, v := range a64 {
		require.Equal(t, float32(math.Floor(v*0x1p23)*0x1p-23), a32[i], "entry %d", i)
		require.True(t, v >= -1 && v < 1 && a32[i] >= -1 && a32[i] < 1, "entry %d: %v", i, v)
		sum += v
		sq += v * v
	}
	// The mean of n² uniforms on [-1, 1) has a standard deviation of
	// 1/(√3·n) ≈ 0.0023; their variance is 1/3.
	assert.InDelta(t, 0, sum/(n*n), 0.01, "mean")
	assert.InDelta(t, 1.0/3, sq/(n*n), 0.01, "variance")
	assert.NotEqual(t, Random[float64](4, 4, 7), Random[float64](4, 4, 8), "other seed, other matrix")
	assert.NotEqual(t, Random[float64](4, 4, 7)[4:8], SPD[float64](4, 7)[4:8], "Random and SPD share no entries")
}

// A tile outside the matrix or its buffer is a programming error: the
// generators panic, naming it.
func TestTileMisuse(t *testing.T) {
	dst := make([]float64, 16)
	assert.PanicsWithValue(t, "tiled: SPDTile: tile 4×4 at (1, 0) outside the 4×4 matrix", func() { SPDTile(dst, 4, 4, 1, 1, 0, 4, 4) })
	assert.PanicsWithValue(t, "tiled: RandomTile: 4×5 tile in 16 values with stride 5", func() { RandomTile(dst, 5, 1, 0, 0, 4, 5) })
	assert.PanicsWithValue(t, "tiled: RandomTile: 2×2 tile in 16 values with stride 1", func() { RandomTile(dst, 1, 1, 0, 0, 2, 2) })
	assert.PanicsWithValue(t, "tiled: RandomTile: negative tile -1×2 at (0, 0)", func() { RandomTile(dst, 2, 1, 0, 0, -1, 2) })
	assert.NotPanics(t, func() { RandomTile(dst, 5, 1, 100, 100, 3, 5) }, "3 rows of 5 with stride 5 fit in 16")
}

// TestRanksHereLocal: in-process ranks all share this host, rank 0
// included. (RanksHere answers that from the backend alone; what it no
// longer does, building every rank's resource set on every rank, shows
// in memory only: pzrun -n 4096 cholesky was killed at 23 GB.)
func TestRanksHereLocal(t *testing.T) {
	err := runtimeview.RunLocal(context.Background(), 5, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		n, root := RanksHere(rt)
		if n != 5 || !root {
			return fmt.Errorf("rank %d: RanksHere = %d, %v; want 5, true", rt.Rank(), n, root)
		}
		return nil
	}, runtimeview.WithLogOptions(logger.WithEnv(nil), logger.WithOff()))
	require.NoError(t, err)
}

// The devices' line counts in the singular what is one.
func TestDevicesStringSingular(t *testing.T) {
	d := Devices{Devices: 1, DeviceTasks: 1, DeviceBytes: 1 << 20, Evictions: 1}
	assert.Equal(t, ", 1 device ran 1 task, 1.0 MiB copied, 1 eviction (0 written back)", d.String())
	d = Devices{Devices: 2, DeviceTasks: 5, DeviceBytes: 1 << 20, Evictions: 0, WriteBacks: 0}
	assert.Equal(t, ", 2 devices ran 5 tasks, 1.0 MiB copied, 0 evictions (0 written back)", d.String())
}
