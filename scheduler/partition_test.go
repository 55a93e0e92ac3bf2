package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
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

// TestPartitionedDataActsOnTiles: Data and Fetch on a partitioned handle
// act on its tiles, whose copies live on a device: a write through the
// whole's Data is what the next device task on a tile sees, and Fetch of
// the whole returns the tiles' newest versions. (Both looked at the
// whole's own copies only: the write was lost, and Fetch returned stale
// data with a nil error.)
func TestPartitionedDataActsOnTiles(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{Memory: 1 << 20}))
	x := make([]float64, 4096)
	h, err := s.RegisterVector(x, scheduler.Named("x"))
	require.NoError(t, err)
	tiles, err := h.Partition(scheduler.Blocks(1024, 1))
	require.NoError(t, err)
	var devs []int
	for _, w := range s.Workers() {
		if w.Kind != scheduler.CPUWorker {
			devs = append(devs, w.ID)
		}
	}
	require.NotEmpty(t, devs)
	dc, err := s.NewContext("device", scheduler.ContextWorkers(devs...))
	require.NoError(t, err)
	inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
		for i, v := range scheduler.VectorOf[float64](c, 0) {
			scheduler.VectorOf[float64](c, 0)[i] = v + 1
		}
		return nil
	}}
	incAll := func() {
		for _, row := range tiles {
			require.NoError(t, s.Submit(ctx, inc, scheduler.RW(row[0]), scheduler.InContext(dc)))
		}
	}
	incAll()
	require.NoError(t, s.WaitAll(ctx))
	v := h.Data().([]float64)
	require.Equal(t, 1.0, v[0])
	v[0] = 100 // through the whole's Data: the tiles' device copies are stale now
	require.NoError(t, s.Submit(ctx, inc, scheduler.RW(tiles[0][0]), scheduler.InContext(dc)))
	require.NoError(t, s.WaitAll(ctx))
	assert.Equal(t, 101.0, x[0], "the device task saw the host's write")

	// A context's WaitAll leaves the newest versions on the device.
	incAll()
	require.NoError(t, dc.WaitAll(ctx))
	got, err := h.Fetch(ctx)
	require.NoError(t, err)
	assert.Equal(t, 102.0, got.([]float64)[0], "Fetch of the whole brings tile 0 back")
	assert.Equal(t, 2.0, got.([]float64)[3000], "and tile 2")
}

// TestDeviceMemoryErrorNamesTheCap: a task whose data does not fit under
// WithCUDAMemoryLimit on a larger device says the cap is the limit, not
// the device (it advised a larger device).
func TestDeviceMemoryErrorNamesTheCap(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{Memory: 64 << 20}),
		scheduler.WithCUDAMemoryLimit(64<<10))
	h, err := s.RegisterVector(make([]float64, 12<<10), scheduler.Named("x")) // 96 KiB
	require.NoError(t, err)
	var devs []int
	for _, w := range s.Workers() {
		if w.Kind != scheduler.CPUWorker {
			devs = append(devs, w.ID)
		}
	}
	dc, err := s.NewContext("device", scheduler.ContextWorkers(devs...))
	require.NoError(t, err)
	touch := &scheduler.Codelet{Name: "touch", CPU: func(*scheduler.Call) error { return nil }}
	require.NoError(t, s.Submit(ctx, touch, scheduler.RW(h), scheduler.InContext(dc)))
	err = dc.WaitAll(ctx)
	require.ErrorIs(t, err, scheduler.ErrDeviceMemory)
	assert.Contains(t, err.Error(), `task "touch" needs 98304 bytes of data on sim0, which has 65536`)
	assert.Contains(t, err.Error(), "its 65536 bytes are the cap of WithCUDAMemoryLimit (PZ_LIMIT_CUDA_MEM; the device has 67108864): raise the cap, or use smaller tiles")

	// Many tasks that do not fit, each with data of its own: one line,
	// with their count (a line per task listed 10,000 for a large graph).
	for i := range 20 {
		x, err := s.RegisterVector(make([]float64, 12<<10), scheduler.Named(fmt.Sprintf("x%d", i)))
		require.NoError(t, err)
		require.NoError(t, s.Submit(ctx, touch, scheduler.RW(x), scheduler.InContext(dc)))
	}
	err = dc.WaitAll(ctx)
	require.ErrorIs(t, err, scheduler.ErrDeviceMemory)
	assert.Contains(t, err.Error(), "(and 19 more like it)")
	assert.Equal(t, 1, strings.Count(err.Error(), "\n")+1, err.Error())
}

// TestStatsCountRedirectedTasks: a device's worker that hands a task to
// the CPU workers, its data too large for the device, counts it in its
// WorkerStats.Redirected (the fallback was silent to a library user).
func TestStatsCountRedirectedTasks(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithPolicy("eager"),
		scheduler.WithSimDevices(scheduler.SimDevice{Memory: 64 << 10}))
	// The CPU worker is held by a task only it can run (a value
	// handle), so the device's worker takes the big task first.
	release := make(chan struct{})
	v, err := s.RegisterValue(new(int))
	require.NoError(t, err)
	hold := &scheduler.Codelet{Name: "hold", CPU: func(*scheduler.Call) error { <-release; return nil }}
	require.NoError(t, s.Submit(ctx, hold, scheduler.RW(v)))
	big, err := s.RegisterVector(make([]float64, 12<<10), scheduler.Named("big")) // 96 KiB
	require.NoError(t, err)
	ranOn := make(chan scheduler.WorkerKind, 1)
	touch := &scheduler.Codelet{Name: "touch", CPU: func(c *scheduler.Call) error {
		ranOn <- s.Workers()[c.Worker].Kind
		return nil
	}}
	require.NoError(t, s.Submit(ctx, touch, scheduler.RW(big)))
	dev := -1
	for _, w := range s.Workers() {
		if w.Kind == scheduler.SimWorker {
			dev = w.ID
		}
	}
	require.Eventually(t, func() bool { return s.Stats()[dev].Redirected == 1 }, 10*time.Second, time.Millisecond,
		"the device's worker redirects the task")
	close(release)
	require.NoError(t, s.WaitAll(ctx))
	assert.Equal(t, scheduler.CPUWorker, <-ranOn)
	assert.Equal(t, int64(1), s.Stats()[dev].Redirected)
}

// A Blocking of zero elements says that Blocks takes a tile's size; a
// tile of an unpartitioned handle says it is gone, not to unpartition a
// parent that was.
func TestPartitionMisuseMessages(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1))
	m, err := s.RegisterMatrix(make([]float64, 16), 4, 4, scheduler.Named("m"))
	require.NoError(t, err)
	_, err = m.Partition(scheduler.Blocks(0, 2))
	require.ErrorIs(t, err, scheduler.ErrBadData)
	assert.Contains(t, err.Error(), "into tiles of 0 x 2 elements: a tile has at least 1 row and 1 column (Blocks(rows, cols) gives a tile's size, not the number of tiles)")
	tiles, err := m.Partition(scheduler.Blocks(2, 2))
	require.NoError(t, err)
	_, err = tiles[0][0].Unregister(ctx)
	require.ErrorIs(t, err, scheduler.ErrBadData)
	assert.Contains(t, err.Error(), "Unpartition its parent instead")
	require.NoError(t, m.Unpartition())
	_, err = tiles[0][0].Unregister(ctx)
	require.ErrorIs(t, err, scheduler.ErrUnregistered)
	assert.Contains(t, err.Error(), "whose parent was unpartitioned: the tile is gone already")
	assert.NotContains(t, err.Error(), "Unpartition its parent")
}

// Partition, Unpartition and SetReduction refuse a handle that is gone,
// naming it, and Partition refuses after Close, as Register does.
func TestPartitionAndReductionOfGoneHandles(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1))
	require.NoError(t, err)
	v, err := s.RegisterVector(make([]float64, 8), scheduler.Named("v"))
	require.NoError(t, err)
	_, err = v.Unregister(ctx)
	require.NoError(t, err)
	add := &scheduler.Codelet{Name: "add", CPU: func(*scheduler.Call) error { return nil }}
	err = v.SetReduction(add, add)
	require.ErrorIs(t, err, scheduler.ErrUnregistered)
	assert.Contains(t, err.Error(), `setting the reduction: scheduler: handle used after unregister: handle "v" was unregistered`)
	err = v.Unpartition()
	require.ErrorIs(t, err, scheduler.ErrUnregistered)
	assert.Contains(t, err.Error(), `unpartitioning: scheduler: handle used after unregister: handle "v" was unregistered`)

	w, err := s.RegisterVector(make([]float64, 8), scheduler.Named("w"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = w.Partition(scheduler.Blocks(4, 1))
	require.ErrorIs(t, err, scheduler.ErrClosed)
	assert.Contains(t, err.Error(), `partitioning handle "w": scheduler: closed`)
}

// WithTeam(0) and WithTeam(1) are ordinary tasks; a negative team is
// refused, and the message says which counts are allowed.
func TestTeamOfZeroIsOneWorker(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	var ran atomic.Int32
	cl := &scheduler.Codelet{Name: "one", CPU: func(c *scheduler.Call) error {
		if c.Size != 1 || c.Rank != 0 {
			return fmt.Errorf("team of %d, rank %d", c.Size, c.Rank)
		}
		ran.Add(1)
		return nil
	}}
	require.NoError(t, s.Submit(ctx, cl, scheduler.WithTeam(0)))
	require.NoError(t, s.Submit(ctx, cl, scheduler.WithTeam(1)))
	require.NoError(t, s.WaitAll(ctx))
	assert.EqualValues(t, 2, ran.Load())
	err := s.Submit(ctx, cl, scheduler.WithTeam(-1))
	require.ErrorIs(t, err, scheduler.ErrBadTeam)
	assert.Contains(t, err.Error(), "WithTeam(n) takes n >= 0 (0 and 1 run the task on one worker)")
}
