package scheduler_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestOverlapAcrossSchedulers: the same memory registered twice, with one
// scheduler or with two of the process (in-process ranks share memory),
// is refused with an error naming both registrations; Unregister and
// Close release it.
func TestOverlapAcrossSchedulers(t *testing.T) {
	ctx := testCtx(t)
	a := newSched(t, scheduler.WithWorkers(1))
	b := newSched(t, scheduler.WithWorkers(1))
	data := make([]float64, 64)
	var x int64

	ha, err := a.RegisterVector(data[:32], scheduler.Named("rank0-tile"))
	require.NoError(t, err)
	_, err = a.RegisterValue(&x, scheduler.Named("x"))
	require.NoError(t, err)

	_, err = a.RegisterVector(data, scheduler.Named("again"))
	require.ErrorIs(t, err, scheduler.ErrOverlap)
	assert.Contains(t, err.Error(), `"again"`)
	assert.Contains(t, err.Error(), `"rank0-tile"`)
	assert.Contains(t, err.Error(), "same scheduler")

	_, err = b.RegisterMatrix(data[16:48], 4, 8, scheduler.Named("rank1-tile"))
	require.ErrorIs(t, err, scheduler.ErrOverlap)
	assert.Contains(t, err.Error(), `"rank1-tile"`)
	assert.Contains(t, err.Error(), `"rank0-tile"`)
	assert.Contains(t, err.Error(), "of this process")
	_, err = b.RegisterValue(&x)
	require.ErrorIs(t, err, scheduler.ErrOverlap)
	assert.Contains(t, err.Error(), `"x"`)

	// Adjacent memory is not an overlap.
	_, err = b.RegisterVector(data[32:], scheduler.Named("rank1-own"))
	require.NoError(t, err)

	// Unregistering releases the memory for the other scheduler.
	_, err = ha.Unregister(ctx)
	require.NoError(t, err)
	_, err = b.RegisterVector(data[:32])
	require.NoError(t, err)

	// Closing releases everything a scheduler registered.
	require.NoError(t, b.Close())
	_, err = a.RegisterVector(data)
	require.NoError(t, err)
}

// TestOverlapSliceAndMapValues: a slice or a map registered as a value
// is memory a writer changes in place, like a pointer's: registering it
// beside a vector over the same memory, or twice, is refused; after
// Unregister it can be registered again.
func TestOverlapSliceAndMapValues(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1))
	buf := make([]int, 4)
	_, err := s.RegisterVector(buf, scheduler.Named("vec"))
	require.NoError(t, err)
	_, err = s.RegisterValue(buf, scheduler.Named("slice"))
	require.ErrorIs(t, err, scheduler.ErrOverlap)
	assert.Contains(t, err.Error(), `"slice"`)
	assert.Contains(t, err.Error(), `"vec"`)
	_, err = s.RegisterValue(buf[2:3], scheduler.Named("part"))
	require.ErrorIs(t, err, scheduler.ErrOverlap)

	other := make([]int, 4)
	h, err := s.RegisterValue(other, scheduler.Named("other"))
	require.NoError(t, err)
	_, err = s.RegisterValue(other, scheduler.Named("other-again"))
	require.ErrorIs(t, err, scheduler.ErrOverlap)
	_, err = h.Unregister(ctx)
	require.NoError(t, err)
	_, err = s.RegisterValue(other)
	require.NoError(t, err)

	m := map[string]int{}
	_, err = s.RegisterValue(m, scheduler.Named("map"))
	require.NoError(t, err)
	_, err = s.RegisterValue(m, scheduler.Named("map-again"))
	require.ErrorIs(t, err, scheduler.ErrOverlap)
	assert.Contains(t, err.Error(), `"map"`)
	_, err = s.RegisterValue(map[string]int{}, scheduler.Named("another-map"))
	require.NoError(t, err)
}

// TestModeCombinations: which access modes may name one handle twice in
// one task (see the package doc, "Access modes on one handle").
func TestModeCombinations(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1))
	var v float64
	h, err := s.RegisterValue(&v)
	require.NoError(t, err)
	nop := &scheduler.Codelet{Name: "nop", CPU: func(*scheduler.Call) error { return nil }}
	add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*float64](c, 0) += *scheduler.ValueOf[*float64](c, 1)
		return nil
	}}
	require.NoError(t, h.SetReduction(nop, add))
	modes := map[string]func(*scheduler.Handle) scheduler.Arg{
		"R": scheduler.R, "W": scheduler.W, "RW": scheduler.RW,
		"Scratch": scheduler.Scratch, "Redux": scheduler.Redux, "Commute": scheduler.Commute,
	}
	plain := map[string]bool{"R": true, "W": true, "RW": true}
	for a, ma := range modes {
		for b, mb := range modes {
			err := s.Submit(ctx, nop, ma(h), mb(h))
			if plain[a] && plain[b] || a == b {
				assert.NoError(t, err, "%s+%s", a, b)
			} else {
				assert.ErrorIs(t, err, scheduler.ErrInvalidMode, "%s+%s", a, b)
				if err != nil {
					assert.Contains(t, err.Error(), "accesses", "%s+%s", a, b)
				}
			}
		}
	}
	require.NoError(t, s.WaitAll(ctx))
}
