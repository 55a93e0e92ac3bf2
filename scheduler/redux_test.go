package scheduler_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

var (
	clZero = &scheduler.Codelet{Name: "zero", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*float64](c, 0) = 0
		return nil
	}}
	clAdd = &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*float64](c, 0) += *scheduler.ValueOf[*float64](c, 1)
		return nil
	}}
	clDot = &scheduler.Codelet{Name: "dot", CPU: func(c *scheduler.Call) error {
		x := scheduler.VectorOf[float64](c, 0)
		y := scheduler.VectorOf[float64](c, 1)
		acc := scheduler.ValueOf[*float64](c, 2)
		for i := range x {
			*acc += x[i] * y[i]
		}
		return nil
	}}
)

// A dot product by tiles accumulating into one Redux handle; the result
// is read by a later task, and a second round is combined by Close.
func TestReduxDot(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(3))
	const n = 1000
	x, y := make([]float64, n), make([]float64, n)
	want := 0.0
	for i := range x {
		x[i], y[i] = float64(i%7), float64(i%5)
		want += x[i] * y[i]
	}
	hx, _ := s.RegisterVector(x)
	hy, _ := s.RegisterVector(y)
	tx, err := hx.Partition(scheduler.Blocks(64, 1))
	require.NoError(t, err)
	ty, _ := hy.Partition(scheduler.Blocks(64, 1))
	require.Len(t, tx, 16)
	var dot float64 = 1 // the initial value is kept: contributions add to it
	hd, _ := s.RegisterValue(&dot)
	require.NoError(t, hd.SetReduction(clZero, clAdd))
	for i := range tx {
		require.NoError(t, s.Submit(ctx, clDot, scheduler.R(tx[i][0]), scheduler.R(ty[i][0]), scheduler.Redux(hd)))
	}
	var seen float64
	read := &scheduler.Codelet{Name: "read", CPU: func(c *scheduler.Call) error {
		seen = *scheduler.ValueOf[*float64](c, 0)
		return nil
	}}
	require.NoError(t, s.Submit(ctx, read, scheduler.R(hd)))
	require.NoError(t, s.WaitAll(ctx))
	require.Equal(t, want+1, seen)
	require.Equal(t, want+1, dot)

	// A second round left pending: Close combines it.
	for i := range tx {
		require.NoError(t, s.Submit(ctx, clDot, scheduler.R(tx[i][0]), scheduler.R(ty[i][0]), scheduler.Redux(hd)))
	}
	require.NoError(t, s.Close())
	require.Equal(t, 2*want+1, dot)
}

// TestReduxCanceledCountsUserTasks: when a failure cancels Redux tasks,
// the reduction's own combination step, canceled with them, is neither
// counted nor named among the tasks not run.
func TestReduxCanceledCountsUserTasks(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	var sum float64
	h, err := s.RegisterValue(&sum)
	require.NoError(t, err)
	require.NoError(t, h.SetReduction(clZero, clAdd))
	boom := &scheduler.Codelet{Name: "boom", CPU: func(*scheduler.Call) error { return errors.New("bad start") }}
	add1 := &scheduler.Codelet{Name: "add1", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*float64](c, 0)++
		return nil
	}}
	read := &scheduler.Codelet{Name: "read", CPU: func(*scheduler.Call) error { return nil }}
	require.NoError(t, s.Submit(ctx, boom, scheduler.RW(h)))
	require.NoError(t, s.Submit(ctx, add1, scheduler.Redux(h)))
	require.NoError(t, s.Submit(ctx, add1, scheduler.Redux(h)))
	require.NoError(t, s.Submit(ctx, read, scheduler.R(h)))
	err = s.WaitAll(ctx)
	require.ErrorIs(t, err, scheduler.ErrCanceled)
	assert.Contains(t, err.Error(), "3 tasks not run")
	assert.NotContains(t, err.Error(), "redux:")
}

// Tiles take their parent's reduction when Partition makes them: a
// reduction set on the parent afterwards would not reach them, so it is
// refused, while one set before reaches every tile.
func TestReduxSetOnPartitioned(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	zero := &scheduler.Codelet{Name: "vzero", CPU: func(c *scheduler.Call) error {
		clear(scheduler.VectorOf[float64](c, 0))
		return nil
	}}
	add := &scheduler.Codelet{Name: "vadd", CPU: func(c *scheduler.Call) error {
		x, y := scheduler.VectorOf[float64](c, 0), scheduler.VectorOf[float64](c, 1)
		for i := range x {
			x[i] += y[i]
		}
		return nil
	}}
	inc := &scheduler.Codelet{Name: "vinc", CPU: func(c *scheduler.Call) error {
		for i, x := 0, scheduler.VectorOf[float64](c, 0); i < len(x); i++ {
			x[i]++
		}
		return nil
	}}
	v := make([]float64, 8)
	h, err := s.RegisterVector(v, scheduler.Named("v"))
	require.NoError(t, err)
	tiles, err := h.Partition(scheduler.Blocks(4, 1))
	require.NoError(t, err)
	err = h.SetReduction(zero, add)
	require.ErrorIs(t, err, scheduler.ErrPartitioned)
	assert.ErrorContains(t, err, `"v"`)
	require.NoError(t, h.Unpartition())

	require.NoError(t, h.SetReduction(zero, add))
	tiles, err = h.Partition(scheduler.Blocks(4, 1))
	require.NoError(t, err)
	for range 3 {
		for _, r := range tiles {
			require.NoError(t, s.Submit(ctx, inc, scheduler.Redux(r[0])))
		}
	}
	require.NoError(t, h.Unpartition())
	require.NoError(t, s.WaitAll(ctx))
	assert.Equal(t, []float64{3, 3, 3, 3, 3, 3, 3, 3}, v)
}
