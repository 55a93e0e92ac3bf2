package cholesky

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/internal/apps/tiled"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler"
)

// The distributed factorization is correct on 1 to 4 in-process ranks, odd
// grids included, in both precisions; rank 0's result names the ranks and
// counts the tiles sent.
func TestRunDistResidual(t *testing.T) {
	for _, tc := range []struct{ ranks, p, q, prec int }{
		{1, 0, 0, 64}, {2, 0, 0, 64}, {3, 0, 0, 32}, {4, 2, 2, 64}, {4, 1, 4, 32},
	} {
		t.Run(fmt.Sprintf("ranks=%d/grid=%dx%d/fp%d", tc.ranks, tc.p, tc.q, tc.prec), func(t *testing.T) {
			opts := Options{N: 192, Block: 32, Precision: tc.prec, Check: true, Seed: 3, GridP: tc.p, GridQ: tc.q,
				SchedulerOptions: []scheduler.Option{scheduler.WithPerfModelDir(t.TempDir())}}
			res, err := tiled.OnRanks(testCtx(t), tc.ranks, func(ctx context.Context, rt *runtimeview.RuntimeView) (*Result, error) {
				return RunDist(ctx, rt, opts, nil)
			})
			require.NoError(t, err)
			require.NotNil(t, res)
			assert.Equal(t, tc.ranks, res.Ranks)
			assert.True(t, res.Checked)
			assert.Less(t, res.Residual, Tolerance(tc.prec, opts.N))
			assert.Equal(t, 6+15+15+20, res.Tasks)
			if tc.ranks == 1 {
				assert.Zero(t, res.Messages)
			} else {
				assert.Positive(t, res.Messages)
				assert.Equal(t, res.Messages*int64(32*32*tc.prec/8), res.BytesSent, "every message is one tile")
			}
		})
	}
}

// A grid that does not match the rank count is refused on every rank.
func TestRunDistBadGrid(t *testing.T) {
	err := runtimeview.RunLocal(testCtx(t), 2, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		_, err := RunDist(ctx, rt, Options{N: 64, Block: 32, GridP: 2, GridQ: 2}, nil)
		if err == nil {
			return fmt.Errorf("a 2x2 grid on 2 ranks was accepted")
		}
		assert.Contains(t, err.Error(), "2 x 2 process grid for 2 ranks")
		return nil
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()))
	require.NoError(t, err)
}

// Each rank generates only the tiles it owns, yet the distributed run
// factors the single-rank run's matrix: the same seeds give the same
// residual, bit for bit (both factor the same tiles with the same
// kernels in the same order per tile), and another seed a different one.
func TestRunDistSameMatrixAsRun(t *testing.T) {
	for _, prec := range []int{32, 64} {
		t.Run(fmt.Sprintf("fp%d", prec), func(t *testing.T) {
			// CPU workers only: a GPU's kernels round differently.
			opts := Options{N: 256, Block: 64, Precision: prec, Check: true, Seed: 7, Workers: 2,
				SchedulerOptions: []scheduler.Option{scheduler.WithPerfModelDir(t.TempDir()), scheduler.WithCUDA(0)}}
			one, err := Run(testCtx(t), opts, nil)
			require.NoError(t, err)
			dist := func(opts Options) *Result {
				res, err := tiled.OnRanks(testCtx(t), 3, func(ctx context.Context, rt *runtimeview.RuntimeView) (*Result, error) {
					return RunDist(ctx, rt, opts, nil)
				})
				require.NoError(t, err)
				require.NotNil(t, res)
				return res
			}
			got := dist(opts)
			assert.Less(t, got.Residual, Tolerance(prec, opts.N))
			assert.Equal(t, one.Residual, got.Residual, "the single-rank run's matrix and factor")
			opts.Seed++
			assert.NotEqual(t, one.Residual, dist(opts).Residual, "another seed, another matrix")
		})
	}
}
