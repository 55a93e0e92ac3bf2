package cholesky

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/internal/apps/tiled"
	"github.com/pzgo/pz/internal/linalg"
	"github.com/pzgo/pz/scheduler"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Every policy factors correctly in both precisions, with 2 and 3
// workers (3 > cores on the test machine exercises oversubscription).
func TestRunEveryPolicy(t *testing.T) {
	for _, pol := range scheduler.Policies() {
		for _, prec := range []int{32, 64} {
			t.Run(fmt.Sprintf("%s/fp%d", pol, prec), func(t *testing.T) {
				opts := Options{N: 192, Block: 32, Precision: prec, Policy: pol, Workers: 2 + prec/64, Check: true, Seed: 7,
					Warmup: 1, SchedulerOptions: []scheduler.Option{scheduler.WithPerfModelDir(t.TempDir())}}
				res, err := Run(testCtx(t), opts, nil)
				require.NoError(t, err)
				assert.Equal(t, pol, res.Policy)
				assert.Equal(t, opts.Workers, res.Workers)
				assert.Equal(t, 6+15+15+20, res.Tasks, "6×6 tiles: 6 POTRF, 15 TRSM, 15 SYRK, 20 GEMM")
				assert.True(t, res.Checked)
				assert.Less(t, res.Residual, Tolerance(prec, opts.N))
				assert.Greater(t, res.GFlops, 0.0)
				assert.Greater(t, res.SeqGFlops, 0.0)
				assert.Greater(t, res.Efficiency, 0.0)
				for _, k := range []string{"potrf", "trsm", "syrk", "gemm"} {
					assert.Greater(t, res.KernelGFlops[k], 0.0, k)
				}
			})
		}
	}
}

// Both layouts give the same factor as the unblocked whole-matrix one.
func TestRunLayouts(t *testing.T) {
	for _, matrix := range []bool{false, true} {
		opts := Options{N: 128, Block: 32, Precision: 64, Workers: 2, Check: true, MatrixLayout: matrix,
			SchedulerOptions: []scheduler.Option{scheduler.WithPerfModelDir(t.TempDir())}}
		res, err := Run(testCtx(t), opts, nil)
		require.NoError(t, err)
		assert.Equal(t, layoutName(matrix), res.Layout)
		assert.Less(t, res.Residual, Tolerance(64, opts.N), "matrix layout %v", matrix)
	}
}

func TestTileLayoutRoundTrip(t *testing.T) {
	const n, b = 96, 32
	a := tiled.Random[float32](n, n, 4)
	m := ToTiles(a, n, b)
	require.Equal(t, 3, m.NT)
	assert.Equal(t, a[(2*b+5)*n+1*b+7], m.Tiles[2][1][5*b+7])
	out := make([]float32, n*n)
	m.CopyTo(out)
	for i := range n {
		for j := range n {
			if j/b <= i/b {
				require.Equal(t, a[i*n+j], out[i*n+j], "(%d,%d)", i, j)
			} else {
				require.Zero(t, out[i*n+j], "upper tile (%d,%d) written", i, j)
			}
		}
	}
}

// FactorTiles on the tile layout matches the whole-matrix factorization.
func TestFactorTilesMatchesWholeMatrixPotrf(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPerfModelDir(t.TempDir()))
	require.NoError(t, err)
	defer func() { assert.NoError(t, s.Close()) }()
	const n, b = 160, 32
	a := tiled.SPD[float64](n, 12)
	whole := append([]float64(nil), a...)
	require.NoError(t, linalg.Potrf(n, whole, n))
	m := ToTiles(a, n, b)
	_, err = FactorTiles(ctx, s, newCodelets[float64](), m, nil)
	require.NoError(t, err)
	m.CopyTo(a)
	for i := range n {
		for j := 0; j <= i; j++ {
			require.InDelta(t, whole[i*n+j], a[i*n+j], 1e-12, "L[%d,%d]", i, j)
		}
	}
}

// Factor's result equals the unblocked factorization of the whole matrix
// (same kernels' math, another order of operations).
func TestFactorMatchesWholeMatrixPotrf(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPerfModelDir(t.TempDir()))
	require.NoError(t, err)
	defer func() { assert.NoError(t, s.Close()) }()
	const n, b = 160, 32
	a := tiled.SPD[float64](n, 11)
	whole := append([]float64(nil), a...)
	require.NoError(t, linalg.Potrf(n, whole, n))
	_, err = Factor(ctx, s, newCodelets[float64](), a, n, b, nil)
	require.NoError(t, err)
	for i := range n {
		for j := 0; j <= i; j++ {
			require.InDelta(t, whole[i*n+j], a[i*n+j], 1e-12, "L[%d,%d]", i, j)
		}
	}
}

// A matrix that is not positive definite fails the POTRF task of the
// tile where it breaks down; the tasks after it are canceled and the
// error names the kernel's sentinel.
func TestFactorNotPositiveDefinite(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPerfModelDir(t.TempDir()))
	require.NoError(t, err)
	defer s.Close()
	const n, b = 128, 32
	a := tiled.SPD[float32](n, 3)
	a[70*n+70] = -1e6 // breaks down in tile (2,2)
	_, err = Factor(ctx, s, newCodelets[float32](), a, n, b, nil)
	require.Error(t, err)
	assert.True(t, errors.Is(err, linalg.ErrNotPositiveDefinite), "%v", err)
	assert.True(t, errors.Is(err, scheduler.ErrCanceled), "the last POTRF depends on the failed one: %v", err)
	var te *scheduler.TaskError
	require.True(t, errors.As(err, &te))
	assert.Equal(t, "cholesky_potrf_f32", te.Codelet)
}

func TestResidualDetectsWrongFactor(t *testing.T) {
	ctx := testCtx(t)
	const n, b = 96, 32
	a0 := tiled.SPD[float64](n, 5)
	l := append([]float64(nil), a0...)
	require.NoError(t, linalg.Potrf(n, l, n))
	r, err := Residual(ctx, a0, l, n, b, 2)
	require.NoError(t, err)
	assert.Less(t, r, 1e-14)
	l[80*n+3] += 1e-3 // one wrong entry of L, in an off-diagonal tile
	r, err = Residual(ctx, a0, l, n, b, 2)
	require.NoError(t, err)
	assert.Greater(t, r, 1e-7)
}

func TestRunBadOptions(t *testing.T) {
	ctx := testCtx(t)
	for _, o := range []Options{
		{N: 100, Block: 32}, {N: 0, Block: 1}, {N: 64, Block: 32, Precision: 16}, {N: 64, Block: 32, Workers: -1},
	} {
		_, err := Run(ctx, o, nil)
		assert.True(t, errors.Is(err, tiled.ErrBadOptions), "%+v: %v", o, err)
	}
	_, err := Run(ctx, Options{N: 64, Block: 32, Policy: "nope"}, nil)
	assert.True(t, errors.Is(err, scheduler.ErrUnknownPolicy), "%v", err)
}

// A matrix that cannot fit is refused before anything is allocated
// (it panicked in makeslice), naming the size it needs.
func TestRunRefusesMatrixBeyondMemory(t *testing.T) {
	_, err := Run(testCtx(t), Options{N: 10_000_000, Block: 1000}, nil)
	require.ErrorIs(t, err, tiled.ErrBadOptions)
	assert.Contains(t, err.Error(), "cholesky: n=10000000: ")
	assert.Contains(t, err.Error(), "needs at least 909.5 TiB of memory")
	assert.Contains(t, err.Error(), "available here")
}

// The memory a run needs, as its checks count it, and the root's share
// of a distributed run with Check.
func TestMemoryEstimates(t *testing.T) {
	const gib, mib = 1 << 30, 1 << 20
	o := Options{N: 16384, Block: 1024, Precision: 64} // 2 GiB a matrix, 16 tiles a side
	assert.NoError(t, checkMemory(o, 6*gib), "2 matrices + 136/256 of one")
	assert.ErrorIs(t, checkMemory(o, 5*gib), tiled.ErrBadOptions)
	o.Check = true
	assert.ErrorIs(t, checkMemory(o, 6*gib), tiled.ErrBadOptions, "and the residual's fp64 copy")
	// Distributed, a rank holds its share of the 136 tiles (1.06 GiB in
	// all) and, on the root with Check, the matrix, the factor and its
	// fp64 copy.
	o.Check = false
	assert.NoError(t, checkDistMemory(o, 4, 4, true, 1088*mib), "4 ranks here, each with a quarter of the tiles")
	assert.ErrorIs(t, checkDistMemory(o, 4, 4, true, 1087*mib), tiled.ErrBadOptions)
	assert.NoError(t, checkDistMemory(o, 64, 4, true, 68*mib), "4 of 64 ranks here: 4/64 of the tiles")
	err := checkDistMemory(o, 64, 4, true, 67*mib)
	require.ErrorIs(t, err, tiled.ErrBadOptions)
	assert.Contains(t, err.Error(), "needs at least 68.0 MiB of memory (4 rank(s) here, each with its share of the 136 tiles of 1024×1024 fp64)")
	o.Check = true
	assert.NoError(t, checkDistMemory(o, 4, 4, true, 7232*mib), "the root also holds 3 matrices")
	err = checkDistMemory(o, 4, 4, true, 7231*mib)
	require.ErrorIs(t, err, tiled.ErrBadOptions, "the root generates the matrix and collects the factor")
	assert.Contains(t, err.Error(), "needs at least 7.1 GiB of memory (4 rank(s) here, each with its share of the 136 tiles of 1024×1024 fp64; on rank 0, the 16384×16384 matrix, the collected factor and its fp64 copy)")
	assert.NoError(t, checkDistMemory(o, 4, 4, false, 1088*mib), "not on the root's host")
}

func TestTaskCounts(t *testing.T) {
	// Against a direct enumeration of the submission loops.
	for nt := 1; nt <= 7; nt++ {
		var want counts
		for k := range nt {
			want.potrf++
			for i := k + 1; i < nt; i++ {
				want.trsm++
				want.syrk++
				for j := k + 1; j < i; j++ {
					want.gemm++
				}
			}
		}
		assert.Equal(t, want, taskCounts(nt), "nt=%d", nt)
	}
}

// tileTasks counts the tasks walkGraph submits that write each tile (what
// a rank's progress bar counts in a distributed run), and the counts add
// up to taskCounts.
func TestTileTasks(t *testing.T) {
	cl := newCodelets[float64]()
	for _, nt := range []int{1, 2, 5, 16} {
		writes := map[tile]int{}
		err := walkGraph(nt, func(c *scheduler.Codelet, prio int, at tile, acc ...access) error {
			w := acc[len(acc)-1]
			require.True(t, w.write, "%s%v: the written tile comes last", c.Name, at)
			writes[tile{w.i, w.j}]++
			return nil
		}, cl)
		require.NoError(t, err)
		total := 0
		for i := range nt {
			for j := 0; j <= i; j++ {
				assert.Equal(t, writes[tile{i, j}], tileTasks(j), "nt=%d tile (%d,%d)", nt, i, j)
				total += tileTasks(j)
			}
		}
		assert.Equal(t, taskCounts(nt).total(), total, "nt=%d", nt)
	}
}

// A run times only the kernels it has tasks of: one tile is one POTRF,
// and timing a GEMM, a TRSM and a SYRK on it too cost minutes on 8192
// tiles before a factorization of seconds (pzrun cholesky -n 8192 -b
// 8192, found in the new-user trial). The others' rates are 0. A run
// stopped during the timing returns the stop's cause.
func TestRunTimesOnlyItsKernels(t *testing.T) {
	res, err := Run(testCtx(t), Options{N: 64, Block: 64, Workers: 1, Check: true,
		SchedulerOptions: []scheduler.Option{scheduler.WithPerfModelDir(t.TempDir())}}, nil)
	require.NoError(t, err)
	assert.Greater(t, res.KernelGFlops["potrf"], 0.0)
	for _, k := range []string{"trsm", "syrk", "gemm"} {
		assert.Zero(t, res.KernelGFlops[k], "%s: no such task in a one-tile run", k)
	}
	assert.Greater(t, res.SeqGFlops, 0.0)
	assert.Less(t, res.Residual, Tolerance(32, 64))

	kt, err := timeKernels[float32](testCtx(t), 32, taskCounts(2))
	require.NoError(t, err)
	assert.Positive(t, kt.potrf)
	assert.Positive(t, kt.trsm)
	assert.Positive(t, kt.syrk)
	assert.Zero(t, kt.gemm, "2×2 tiles have no GEMM task")

	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("pzrun: interrupt received")
	cancel(stop)
	_, err = timeKernels[float32](ctx, 32, taskCounts(4))
	require.ErrorIs(t, err, stop)
}
