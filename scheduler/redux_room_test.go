package scheduler_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestDeviceFullOfReductionCopies: a worker's Redux copy stays in the
// device's memory until the reduction task combines it, which happens
// only before the handle's next other access. A later task whose data
// fit the device, but not beside that copy, fails with ErrDeviceMemory;
// the error used to say only "this scheduler N bytes", leaving the user
// (found in the new-user trial of devices, where a random task graph on
// a 1 MiB device failed a Scratch task) to guess what held the room. It
// now names the pending reduction copies, their handle and how to free
// them, and doing as it says lets the task run.
func TestDeviceFullOfReductionCopies(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{Memory: 1 << 20}))
	dev := scheduler.InContext(simOnly(t, s))
	vec := func(name string, n int, v float64) ([]float64, *scheduler.Handle) {
		d := make([]float64, n)
		for i := range d {
			d[i] = v
		}
		h, err := s.RegisterVector(d, scheduler.Named(name))
		require.NoError(t, err)
		return d, h
	}
	const q = 1 << 15 // 256 KiB of float64
	a, ha := vec("a", 2*q, 0)
	_, hx := vec("x", q, 1)
	y, hy := vec("y", q, 2)
	_, htmp := vec("tmp", q, 0)
	zero := &scheduler.Codelet{Name: "zero", CPU: func(c *scheduler.Call) error {
		clear(scheduler.VectorOf[float64](c, 0))
		return nil
	}}
	add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
		d, s := scheduler.VectorOf[float64](c, 0), scheduler.VectorOf[float64](c, 1)
		for i := range d {
			d[i] += s[i]
		}
		return nil
	}}
	require.NoError(t, ha.SetReduction(zero, add))
	one := &scheduler.Codelet{Name: "one", CPU: func(c *scheduler.Call) error {
		v := scheduler.VectorOf[float64](c, 0)
		for i := range v {
			v[i]++
		}
		return nil
	}}
	work := &scheduler.Codelet{Name: "work", CPU: func(c *scheduler.Call) error {
		x, y, tmp := scheduler.VectorOf[float64](c, 0), scheduler.VectorOf[float64](c, 1), scheduler.VectorOf[float64](c, 2)
		copy(tmp, x)
		for i := range y {
			y[i] += tmp[i]
		}
		return nil
	}}
	// The Redux copy of a: 512 KiB of the device's 1 MiB until combined.
	red := scheduler.NewTask(one, scheduler.Redux(ha), dev)
	require.NoError(t, s.SubmitTask(ctx, red))
	require.NoError(t, s.Wait(ctx, red))

	// x, y and tmp: 768 KiB, which fit the device, but not beside it.
	w := scheduler.NewTask(work, scheduler.R(hx), scheduler.RW(hy), scheduler.Scratch(htmp), dev)
	require.NoError(t, s.SubmitTask(ctx, w))
	err := s.Wait(ctx, w)
	require.ErrorIs(t, err, scheduler.ErrDeviceMemory)
	msg := err.Error()
	require.Contains(t, msg, `reduction copies not yet combined hold 524288 bytes (handle "a": 1 copy)`)
	require.Contains(t, msg, "a task that accesses the handle other than by Redux")
	require.Equal(t, 2.0, y[0], "the failed task changed nothing")

	// As the error says: read a, which combines its copy, then run the
	// task again (on a new y: the failure canceled y's later readers).
	peek := &scheduler.Codelet{Name: "peek", CPU: func(*scheduler.Call) error { return nil }}
	require.NoError(t, s.Submit(ctx, peek, scheduler.R(ha), dev))
	y2, hy2 := vec("y2", q, 2)
	w = scheduler.NewTask(work, scheduler.R(hx), scheduler.RW(hy2), scheduler.Scratch(htmp), dev)
	require.NoError(t, s.SubmitTask(ctx, w))
	require.NoError(t, s.Wait(ctx, w))
	err = s.WaitAll(ctx)
	require.ErrorIs(t, err, scheduler.ErrDeviceMemory, "WaitAll reports the first failure")
	_, err = hy2.Fetch(ctx)
	require.NoError(t, err)
	require.Equal(t, 3.0, y2[0])
	require.Equal(t, 3.0, y2[q-1])
	_, err = ha.Fetch(ctx)
	require.NoError(t, err)
	require.Equal(t, 1.0, a[0])
	require.Equal(t, 1.0, a[len(a)-1])
}

// TestScratchWaitsAdmitted: two workers of one device, whose memory
// holds one task's data and Scratch buffer at a time but not two tasks'
// data: a task that got its data used to ask for its Scratch buffer's
// room unadmitted, while the other worker's task, admitted meanwhile,
// held the rest of the device waiting for the first task's data to go;
// each waited for the other until the Scratch allocation gave up (a
// quarter of a second) and the task failed with ErrDeviceMemory,
// canceling its dependents (found by a random task graph in the
// new-user trial of devices). A task with Scratch or Redux accesses now
// stays admitted until they are allocated, and every task runs.
func TestScratchWaitsAdmitted(t *testing.T) {
	ctx := testCtx(t)
	const q = 1 << 15 // 256 KiB of float64
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{Memory: 600 << 10, Workers: 2}))
	var ids []int
	for _, w := range s.Workers() {
		if w.Kind == scheduler.SimWorker {
			ids = append(ids, w.ID)
		}
	}
	require.Len(t, ids, 2)
	c, err := s.NewContext("device", scheduler.ContextWorkers(ids...))
	require.NoError(t, err)
	dev := scheduler.InContext(c)
	const nv = 12
	vs := make([][]float64, nv)
	ref := make([][]float64, nv)
	hs := make([]*scheduler.Handle, nv)
	for i := range vs {
		vs[i], ref[i] = make([]float64, q), make([]float64, q)
		for k := range vs[i] {
			vs[i][k] = float64(i*7 + k)
			ref[i][k] = vs[i][k]
		}
		hs[i], err = s.RegisterVector(vs[i])
		require.NoError(t, err)
	}
	hscr, err := s.RegisterVector(make([]float64, q), scheduler.Named("scratch"))
	require.NoError(t, err)
	out := []float64{0}
	hout, err := s.RegisterVector(out)
	require.NoError(t, err)
	axpy := &scheduler.Codelet{Name: "axpy", CPU: func(c *scheduler.Call) error {
		x, y := scheduler.VectorOf[float64](c, 0), scheduler.VectorOf[float64](c, 1)
		a := c.Arg.(float64)
		for k := range y {
			y[k] += a * x[k]
		}
		return nil
	}}
	scale := &scheduler.Codelet{Name: "scale", CPU: func(c *scheduler.Call) error {
		y := scheduler.VectorOf[float64](c, 0)
		for k := range y {
			y[k] = y[k]*1.0001 + 0.5
		}
		return nil
	}}
	sum := &scheduler.Codelet{Name: "sum", CPU: func(c *scheduler.Call) error {
		x, tmp, o := scheduler.VectorOf[float64](c, 0), scheduler.VectorOf[float64](c, 1), scheduler.VectorOf[float64](c, 2)
		copy(tmp, x)
		for _, v := range tmp {
			o[0] += v
		}
		return nil
	}}
	want := 0.0
	seed := uint64(12345)
	rnd := func(k int) int {
		seed = seed*6364136223846793005 + 1442695040888963407
		return int((seed >> 33) % uint64(k))
	}
	for range 300 {
		i, j := rnd(nv), rnd(nv)
		switch rnd(3) {
		case 0:
			if i == j {
				continue
			}
			a := float64(rnd(5)) - 2
			require.NoError(t, s.Submit(ctx, axpy, scheduler.R(hs[i]), scheduler.RW(hs[j]), scheduler.WithArg(a), dev))
			for k := range ref[j] {
				ref[j][k] += a * ref[i][k]
			}
		case 1:
			require.NoError(t, s.Submit(ctx, scale, scheduler.RW(hs[i]), dev))
			for k := range ref[i] {
				ref[i][k] = ref[i][k]*1.0001 + 0.5
			}
		case 2:
			require.NoError(t, s.Submit(ctx, sum, scheduler.R(hs[i]), scheduler.Scratch(hscr), scheduler.RW(hout), dev))
			for _, v := range ref[i] {
				want += v
			}
		}
	}
	require.NoError(t, s.WaitAll(ctx))
	for i := range vs {
		v, err := hs[i].Fetch(ctx)
		require.NoError(t, err)
		require.Equal(t, ref[i], v, "vector %d", i)
	}
	v, err := hout.Fetch(ctx)
	require.NoError(t, err)
	require.Equal(t, want, v.([]float64)[0])
}
