package comm_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
)

// A nil reduction function is an *ArgError on the rank that passed it
// (it used to panic, which under MPI aborted the job); that rank still
// takes part, so the others complete with their own function.
func TestValueReductionNilFunction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	add := func(a, b int) int { return a + b }
	for _, call := range []string{"AllReduceValue", "ReduceValue"} {
		t.Run(call, func(t *testing.T) {
			errs := make([]error, 3)
			got := make([]int, 3)
			err := local.Run(ctx, 3, func(ctx context.Context, c comm.Comm) error {
				f := add
				if c.Rank() == 1 {
					f = nil
				}
				if call == "AllReduceValue" {
					got[c.Rank()], errs[c.Rank()] = comm.AllReduceValue(ctx, c, c.Rank()+1, f)
				} else {
					got[c.Rank()], errs[c.Rank()] = comm.ReduceValue(ctx, c, c.Rank()+1, f, 0)
				}
				return nil
			})
			require.NoError(t, err)
			var ae *comm.ArgError
			require.True(t, errors.As(errs[1], &ae), "rank 1: %v", errs[1])
			assert.Equal(t, 1, ae.Rank)
			assert.Equal(t, call, ae.Op)
			assert.ErrorIs(t, errs[1], comm.ErrInvalidArg)
			assert.NoError(t, errs[0])
			assert.NoError(t, errs[2])
			assert.Equal(t, 6, got[0])
			if call == "AllReduceValue" {
				assert.Equal(t, 6, got[2])
			}
		})
	}
}
