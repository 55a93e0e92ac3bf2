package comm_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
)

type wave struct {
	Name  string
	Amp   complex128
	Modes []complex64
	By    map[string]complex128
	Extra any
	Next  *wave
}

// Complex numbers round-trip through every value helper, alone and nested
// in structs, slices, maps, pointers and interfaces.
func TestComplexValues(t *testing.T) {
	w := wave{Name: "w", Amp: 1 + 2i, Modes: []complex64{3 - 4i, 0.5i}, By: map[string]complex128{"x": -1i},
		Extra: []any{complex64(2 + 2i), "s", int64(-3)}, Next: &wave{Name: "n", Amp: -7}}
	b, err := comm.Encode(w)
	require.NoError(t, err)
	var back wave
	require.NoError(t, comm.Decode(b, &back))
	assert.Equal(t, w, back)

	err = local.Run(context.Background(), 3, func(ctx context.Context, c comm.Comm) error {
		me := complex(float64(c.Rank()), 1)
		all, err := comm.AllGatherValues(ctx, c, me)
		if err != nil {
			return err
		}
		assert.Equal(t, []complex128{1i, 1 + 1i, 2 + 1i}, all)
		sum, err := comm.AllReduceValue(ctx, c, me, func(a, b complex128) complex128 { return a + b })
		if err != nil {
			return err
		}
		assert.Equal(t, 3+3i, sum)
		got, err := comm.BcastValue(ctx, c, w, 0)
		if err != nil {
			return err
		}
		assert.Equal(t, w, got)
		anyv, err := comm.BcastValue[any](ctx, c, []any{complex128(5i), map[string]any{"k": complex64(1)}}, 1)
		if err != nil {
			return err
		}
		items := anyv.([]any)
		assert.Equal(t, complex128(5i), items[0])
		assert.Equal(t, complex64(1), reflect.ValueOf(items[1]).MapIndex(reflect.ValueOf("k")).Interface())
		if c.Rank() == 0 {
			if err := comm.SendValue(ctx, c, w, 1, 3); err != nil {
				return err
			}
		}
		if c.Rank() == 1 {
			v, _, err := comm.RecvValue[wave](ctx, c, 0, 3)
			if err != nil {
				return err
			}
			assert.Equal(t, w, v)
		}
		part, err := comm.ScatterValues(ctx, c, []complex64{1, 2i, 3}, 2)
		if err != nil {
			return err
		}
		assert.Equal(t, []complex64{1, 2i, 3}[c.Rank()], part)
		return nil
	})
	require.NoError(t, err)
}
