package gemm

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/runtimeview"
)

// The distributed product is right on 1 to 4 in-process ranks, odd grids
// included; rank 0's result names the ranks and counts what moved.
func TestRunDist(t *testing.T) {
	for _, tc := range []struct{ ranks, p, q, prec int }{{1, 0, 0, 32}, {2, 0, 0, 64}, {3, 0, 0, 32}, {4, 0, 0, 64}, {4, 4, 1, 32}} {
		t.Run(fmt.Sprintf("ranks=%d/grid=%dx%d/fp%d", tc.ranks, tc.p, tc.q, tc.prec), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			opts := Options{N: 240, Block: 48, Precision: tc.prec, Check: true, Seed: 5, GridP: tc.p, GridQ: tc.q}
			var res *Result
			err := runtimeview.RunLocal(ctx, tc.ranks, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				r, err := RunDist(ctx, rt, opts, nil)
				if err == nil && rt.Rank() == 0 {
					res = r
				}
				return err
			}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()))
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
