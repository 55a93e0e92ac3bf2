package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// Whole-matrix tasks, tile tasks and nested-tile tasks are ordered by
// Partition and Unpartition like any other accesses.
func TestPartitionOrdering(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(3))
	const rows, cols, ld = 6, 8, 10
	data := make([]float64, (rows-1)*ld+cols)
	m, err := s.RegisterMatrix(data, rows, cols, scheduler.LD(ld), scheduler.Named("m"))
	require.NoError(t, err)
	assert.Equal(t, ld, m.LD())
	slow := func(c *scheduler.Call) { time.Sleep(time.Duration(c.Worker+1) * 200 * time.Microsecond) }
	fill := &scheduler.Codelet{Name: "fill", CPU: func(c *scheduler.Call) error {
		slow(c)
		a := scheduler.MatrixOf[float64](c, 0)
		for i := 0; i < a.Rows; i++ {
			for j := 0; j < a.Cols; j++ {
				a.Set(i, j, 1)
			}
		}
		return nil
	}}
	scale := &scheduler.Codelet{Name: "scale", CPU: func(c *scheduler.Call) error {
		slow(c)
		a := scheduler.MatrixOf[float64](c, 0)
		f := c.Arg.(float64)
		for i := 0; i < a.Rows; i++ {
			for j := 0; j < a.Cols; j++ {
				a.Set(i, j, a.At(i, j)*f+1)
			}
		}
		return nil
	}}
	var sum float64
	total := &scheduler.Codelet{Name: "sum", CPU: func(c *scheduler.Call) error {
		a := scheduler.MatrixOf[float64](c, 0)
		for i := 0; i < a.Rows; i++ {
			for j := 0; j < a.Cols; j++ {
				sum += a.At(i, j)
			}
		}
		return nil
	}}
	require.NoError(t, s.Submit(ctx, fill, scheduler.W(m)))
	tiles, err := m.Partition(scheduler.Blocks(4, 3)) // 2 x 3 tiles, ragged edges
	require.NoError(t, err)
	require.Len(t, tiles, 2)
	require.Len(t, tiles[0], 3)
	assert.Equal(t, 2, tiles[1][2].Rows())
	assert.Equal(t, 2, tiles[1][2].Cols())
	for i := range tiles {
		for j := range tiles[i] {
			require.NoError(t, s.Submit(ctx, scale, scheduler.RW(tiles[i][j]), scheduler.WithArg(2.0)))
		}
	}
	// Nested: tile (0,0) into 2x2 sub-tiles.
	sub, err := tiles[0][0].Partition(scheduler.Blocks(2, 2))
	require.NoError(t, err)
	for i := range sub {
		for j := range sub[i] {
			require.NoError(t, s.Submit(ctx, scale, scheduler.RW(sub[i][j]), scheduler.WithArg(10.0)))
		}
	}
	require.ErrorIs(t, m.Unpartition(), scheduler.ErrPartitioned)
	require.NoError(t, tiles[0][0].Unpartition())
	require.NoError(t, m.Unpartition())
	require.NoError(t, s.Submit(ctx, total, scheduler.R(m)))
	require.NoError(t, s.WaitAll(ctx))
	// Every element: 1 -> 3; tile (0,0) (4x3) then -> 31.
	want := float64(rows*cols-12)*3 + 12*31
	assert.Equal(t, want, sum)
	// Padding between rows (ld > cols) is untouched.
	for i := 0; i < rows-1; i++ {
		for j := cols; j < ld; j++ {
			assert.Zero(t, data[i*ld+j])
		}
	}
}

func TestUnregisterContext(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1))
	var x int
	h, _ := s.RegisterValue(&x)
	release := make(chan struct{})
	hold := &scheduler.Codelet{Name: "hold", CPU: func(*scheduler.Call) error {
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		return nil
	}}
	require.NoError(t, s.Submit(ctx, hold, scheduler.RW(h)))
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	_, err := h.Unregister(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// Still registered: more work may be submitted.
	require.NoError(t, s.Submit(ctx, clIncrInt, scheduler.RW(h)))
	close(release)
	v, err := h.Unregister(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, *v.(*int))
}

var clIncrInt = &scheduler.Codelet{Name: "incr", CPU: func(c *scheduler.Call) error {
	*scheduler.ValueOf[*int](c, 0)++
	return nil
}}
