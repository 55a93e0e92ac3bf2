package comm_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
)

// TestBcastValueTypesDisagree: when root's value is of another type than
// a rank's, that rank gets an *ArgError saying what root broadcasts, root
// gets its value, and every rank stays in step for the next collective.
// Before, a string on root and an int elsewhere gave the others 7 (the
// length of root's encoding) without an error, and the next collective
// failed on every rank ("rank 0 has AllReduce, rank 2 has Bcast").
func TestBcastValueTypesDisagree(t *testing.T) {
	type pair struct {
		name       string
		root, rest func(c comm.Comm, root int) (any, error)
		want       string // in the others' error
	}
	bcast := func(v any) func(c comm.Comm, root int) (any, error) {
		return func(c comm.Comm, root int) (any, error) {
			ctx := context.Background()
			switch v := v.(type) {
			case string:
				return comm.BcastValue(ctx, c, v, root)
			case int:
				return comm.BcastValue(ctx, c, v, root)
			case int64:
				return comm.BcastValue(ctx, c, v, root)
			case []float64:
				return comm.BcastValue(ctx, c, v, root)
			case []int32:
				return comm.BcastValue(ctx, c, v, root)
			case []byte:
				return comm.BcastValue(ctx, c, v, root)
			case complex128:
				return comm.BcastValue(ctx, c, v, root)
			}
			panic(fmt.Sprintf("%T", v))
		}
	}
	cases := []pair{
		{"string/int", bcast("ranks!!"), bcast(0), "broadcasts an encoded value"},
		{"slice/scalar", bcast([]float64{1, 2, 3}), bcast(int64(0)), "broadcasts a slice of float64"},
		{"scalar/slice", bcast(int64(5)), bcast([]float64(nil)), "broadcasts a int64"},
		{"slice/slice", bcast([]float64{1, 2}), bcast([]int32(nil)), "broadcasts a slice of float64"},
		{"slice/encoded", bcast([]float64{1, 2}), bcast(""), "broadcasts a slice of float64"},
		{"encoded/bytes", bcast("text"), bcast([]byte(nil)), "broadcasts an encoded value"},
		{"empty slice/scalar", bcast([]float64{}), bcast(complex128(0)), "broadcasts a slice of float64"},
		{"complex/float slice", bcast(complex128(1 + 2i)), bcast([]float64(nil)), "broadcasts a complex128"},
	}
	for _, n := range []int{1, 3} {
		for _, tc := range cases {
			for _, root := range []int{0, n - 1} {
				t.Run(fmt.Sprintf("%s/ranks=%d/root=%d", tc.name, n, root), func(t *testing.T) {
					err := local.Run(context.Background(), n, func(ctx context.Context, c comm.Comm) error {
						var got any
						var err error
						if c.Rank() == root {
							_, err = tc.root(c, root)
							require.NoError(t, err)
						} else {
							got, err = tc.rest(c, root)
							var ae *comm.ArgError
							require.ErrorAs(t, err, &ae, "rank %d got %v", c.Rank(), got)
							assert.Contains(t, err.Error(), "BcastValue")
							assert.Contains(t, err.Error(), tc.want)
							assert.Contains(t, err.Error(), fmt.Sprintf("root %d", root))
						}
						// In step: the next collective works everywhere.
						sum, err := comm.AllReduceValue(ctx, c, c.Rank(), func(a, b int) int { return a + b })
						require.NoError(t, err)
						assert.Equal(t, n*(n-1)/2, sum)
						return nil
					})
					require.NoError(t, err)
				})
			}
		}
	}
}

// TestBcastValueIntAndInt64: int and int64 travel alike (both 64-bit
// integers), so root's int reaches a rank that asks for an int64.
func TestBcastValueIntAndInt64(t *testing.T) {
	err := local.Run(context.Background(), 3, func(ctx context.Context, c comm.Comm) error {
		if c.Rank() == 1 {
			v, err := comm.BcastValue(ctx, c, -42, 1)
			assert.Equal(t, -42, v)
			return err
		}
		v, err := comm.BcastValue(ctx, c, int64(0), 1)
		assert.Equal(t, int64(-42), v)
		return err
	})
	require.NoError(t, err)
}
