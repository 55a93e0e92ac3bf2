package gemm

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/internal/apps/tiled"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler"
)

// The distributed product is right on 1 to 4 in-process ranks, odd grids
// included; rank 0's result names the ranks and counts what moved.
func TestRunDist(t *testing.T) {
	for _, tc := range []struct{ ranks, p, q, prec int }{{1, 0, 0, 32}, {2, 0, 0, 64}, {3, 0, 0, 32}, {4, 0, 0, 64}, {4, 4, 1, 32}} {
		t.Run(fmt.Sprintf("ranks=%d/grid=%dx%d/fp%d", tc.ranks, tc.p, tc.q, tc.prec), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			opts := Options{N: 240, Block: 48, Precision: tc.prec, Check: true, Seed: 5, GridP: tc.p, GridQ: tc.q}
			res, err := tiled.OnRanks(ctx, tc.ranks, func(ctx context.Context, rt *runtimeview.RuntimeView) (*Result, error) {
				return RunDist(ctx, rt, opts, nil)
			})
			require.NoError(t, err)
			require.NotNil(t, res)
			assert.Equal(t, tc.ranks, res.Ranks)
			assert.Equal(t, 25, res.Tasks)
			assert.True(t, res.Checked)
			assert.Less(t, res.MaxRelErr, Tolerance(tc.prec, opts.N))
			if tc.ranks > 1 {
				assert.Positive(t, res.BytesSent)
			} else {
				assert.Zero(t, res.Messages)
			}
		})
	}
}

// Each rank generates only the panels and tiles it owns, yet the
// distributed product is the single-rank run's: the same seed gives the
// same sampled error, bit for bit (the same kernel on the same panels),
// and another seed a different one.
func TestRunDistSameMatricesAsRun(t *testing.T) {
	for _, prec := range []int{32, 64} {
		t.Run(fmt.Sprintf("fp%d", prec), func(t *testing.T) {
			// CPU workers only: a GPU's kernel rounds differently.
			opts := Options{N: 240, Block: 48, Precision: prec, Check: true, Seed: 9, Workers: 2,
				SchedulerOptions: []scheduler.Option{scheduler.WithPerfModelDir(t.TempDir()), scheduler.WithCUDA(0)}}
			one, err := Run(testCtx(t), opts, nil)
			require.NoError(t, err)
			dist := func(opts Options) *Result {
				res, err := tiled.OnRanks(testCtx(t), 4, func(ctx context.Context, rt *runtimeview.RuntimeView) (*Result, error) {
					return RunDist(ctx, rt, opts, nil)
				})
				require.NoError(t, err)
				require.NotNil(t, res)
				return res
			}
			got := dist(opts)
			assert.Less(t, got.MaxRelErr, Tolerance(prec, opts.N))
			assert.Equal(t, one.MaxRelErr, got.MaxRelErr, "the single-rank run's matrices and product")
			assert.Positive(t, got.SeqGFlops, "rank 0 timed the kernel on panels of its own")
			opts.Seed++
			assert.NotEqual(t, one.MaxRelErr, dist(opts).MaxRelErr, "another seed, other matrices")
		})
	}
}
