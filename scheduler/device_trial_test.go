package scheduler_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestStaleTileHostAccess (trial finding): Fetch of a tile whose parent
// was unpartitioned, while a task on the device writes the parent,
// returned nil and, to make the dead tile's replicas, copied the parent's
// device replica to RAM under the task's writes and freed it under the
// task (its memory back in the node's cache). Fetch now fails with
// ErrUnregistered naming the tile, and touches nothing; Data returns the
// memory without moving data; the task's results reach RAM.
func TestStaleTileHostAccess(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{Memory: 1 << 20, Bandwidth: -1}))
	dev := simOnly(t, s)
	x := make([]float64, 1024)
	h, err := s.RegisterVector(x, scheduler.Named("x"))
	require.NoError(t, err)
	tiles, err := h.Partition(scheduler.Blocks(512, 1))
	require.NoError(t, err)
	require.NoError(t, s.Submit(ctx, incCl, scheduler.RW(tiles[0][0]), scheduler.InContext(dev)))
	require.NoError(t, h.Unpartition())
	require.NoError(t, s.WaitAll(ctx))
	require.Equal(t, 1.0, x[0])

	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before Close, which waits for the task
	slow := &scheduler.Codelet{Name: "slow", CPU: func(c *scheduler.Call) error {
		v := scheduler.VectorOf[float64](c, 0)
		for i := range v {
			v[i] += 10
		}
		close(started)
		<-release
		for i := range v {
			v[i] += 100
		}
		return nil
	}}
	require.NoError(t, s.Submit(ctx, slow, scheduler.RW(h), scheduler.InContext(dev)))
	<-started
	_, err = tiles[0][0].Fetch(ctx)
	require.ErrorIs(t, err, scheduler.ErrUnregistered)
	require.ErrorContains(t, err, `handle "x[0][0]"`)
	tiles[1][0].Data() // the host's memory, as it is: nothing moves
	free()
	require.NoError(t, s.WaitAll(ctx))
	for i, v := range x {
		want := 110.0
		if i < 512 {
			want = 111
		}
		require.Equal(t, want, v, "x[%d]", i)
	}
	// The device's replica is whole: a reader there sees the task's writes.
	sum := make(chan float64, 1)
	rd := &scheduler.Codelet{Name: "sum", CPU: func(c *scheduler.Call) error {
		t := 0.0
		for _, v := range scheduler.VectorOf[float64](c, 0) {
			t += v
		}
		sum <- t
		return nil
	}}
	require.NoError(t, s.Submit(ctx, rd, scheduler.R(h), scheduler.InContext(dev)))
	require.NoError(t, s.WaitAll(ctx))
	require.Equal(t, 512*111.0+512*110.0, <-sum)
}
