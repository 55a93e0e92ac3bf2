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

// TestOverlapMessageByKind: registering memory twice with one scheduler
// says what to do for the kind of the handle registered first: a value
// cannot be partitioned (the message suggested it), a vector or a
// matrix can; the message carries no unexplained scheduler number.
func TestOverlapMessageByKind(t *testing.T) {
	s := newSched(t, scheduler.WithWorkers(1))
	var x float64
	_, err := s.RegisterValue(&x, scheduler.Named("x"))
	require.NoError(t, err)
	_, err = s.RegisterValue(&x, scheduler.Named("x-again"))
	require.ErrorIs(t, err, scheduler.ErrOverlap)
	assert.Contains(t, err.Error(), `handle "x-again" overlaps handle "x", registered with the same scheduler: use that handle, or unregister it first`)
	assert.NotContains(t, err.Error(), "Partition")
	assert.NotContains(t, err.Error(), "(1)")

	vec := make([]float64, 8)
	_, err = s.RegisterVector(vec, scheduler.Named("vec"))
	require.NoError(t, err)
	mat := make([]float64, 16)
	_, err = s.RegisterMatrix(mat, 4, 4, scheduler.Named("mat"))
	require.NoError(t, err)
	for _, tc := range []struct {
		what, first string
		register    func() error
	}{
		{"a value in a vector", "vec", func() error { _, err := s.RegisterValue(&vec[3]); return err }},
		{"a part of a vector", "vec", func() error { _, err := s.RegisterVector(vec[2:4]); return err }},
		{"a matrix's rows", "mat", func() error { _, err := s.RegisterMatrix(mat[4:], 2, 4); return err }},
		{"a vector over a matrix", "mat", func() error { _, err := s.RegisterVector(mat); return err }},
	} {
		err := tc.register()
		require.ErrorIs(t, err, scheduler.ErrOverlap, tc.what)
		assert.Contains(t, err.Error(), `overlaps handle "`+tc.first+`", registered with the same scheduler: use that handle, Partition it and use the tiles over this memory, or unregister it first`, tc.what)
		assert.NotContains(t, err.Error(), "(1)", tc.what)
	}
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

// TestTilesRegisteredInPlace: the b x b tiles of one row-major matrix,
// each registered in place with the matrix's leading dimension (as
// StarPU's users register them), share no element and are accepted,
// with two schedulers too; their tasks run at once, each writing its
// tile (the race detector sees no race). Memory that does share an
// element with a tile - a tile shifted by one column, the whole matrix,
// a value inside a tile's row - is refused; a value in a row's gap is
// not, being no tile's.
func TestTilesRegisteredInPlace(t *testing.T) {
	ctx := testCtx(t)
	const b, nt = 4, 3
	const n = b * nt
	a := newSched(t, scheduler.WithWorkers(2))
	other := newSched(t, scheduler.WithWorkers(1))
	m := make([]float64, n*n)
	tiles := make([][]*scheduler.Handle, nt)
	for i := range nt {
		tiles[i] = make([]*scheduler.Handle, nt)
		for j := range nt {
			s := a
			if j == nt-1 {
				s = other // the last tile column on another "rank"
			}
			h, err := s.RegisterMatrix(m[i*b*n+j*b:], b, b, scheduler.LD(n))
			require.NoError(t, err, "tile (%d,%d)", i, j)
			tiles[i][j] = h
		}
	}
	_, err := a.RegisterMatrix(m[b*n+1:], b, b, scheduler.LD(n), scheduler.Named("shifted"))
	require.ErrorIs(t, err, scheduler.ErrOverlap, "a tile shifted by one column")
	_, err = a.RegisterMatrix(m, n, n, scheduler.Named("whole"))
	require.ErrorIs(t, err, scheduler.ErrOverlap, "the whole matrix")
	_, err = a.RegisterMatrix(m[(b-1)*n+b-1:], 2, 2, scheduler.LD(n), scheduler.Named("corner"))
	require.ErrorIs(t, err, scheduler.ErrOverlap, "a block across four tiles' corners")
	_, err = other.RegisterValue(&m[2*n+3])
	require.ErrorIs(t, err, scheduler.ErrOverlap, "an element of tile (0,0)")
	// A matrix whose rows fall in the gaps of another's: columns 0..1 and
	// 2..3 of a separate 4 x 4 array, both with ld 4.
	g := make([]int32, 16)
	_, err = a.RegisterMatrix(g, 4, 2, scheduler.LD(4), scheduler.Named("left"))
	require.NoError(t, err)
	_, err = a.RegisterMatrix(g[2:], 4, 2, scheduler.LD(4), scheduler.Named("right"))
	require.NoError(t, err)
	_, err = a.RegisterValue(&g[5])
	require.ErrorIs(t, err, scheduler.ErrOverlap, "row 1's element 1, of the left half")

	fill := &scheduler.Codelet{Name: "fill", CPU: func(c *scheduler.Call) error {
		t := scheduler.MatrixOf[float64](c, 0)
		v := c.Arg.(float64)
		for r := range t.Rows {
			for k := range t.Cols {
				t.Data[r*t.Stride+k] = v
			}
		}
		return nil
	}}
	for i := range nt {
		for j := range nt {
			s := a
			if j == nt-1 {
				s = other
			}
			require.NoError(t, s.Submit(ctx, fill, scheduler.W(tiles[i][j]), scheduler.WithArg(float64(i*nt+j+1))))
		}
	}
	require.NoError(t, a.WaitAll(ctx))
	require.NoError(t, other.WaitAll(ctx))
	for r := range n {
		for k := range n {
			require.Equal(t, float64((r/b)*nt+k/b+1), m[r*n+k], "element (%d,%d)", r, k)
		}
	}
	// Unregistered, a tile's rows may be registered as one matrix again.
	_, err = tiles[0][0].Unregister(ctx)
	require.NoError(t, err)
	_, err = a.RegisterMatrix(m, b, b, scheduler.LD(n), scheduler.Named("again"))
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
