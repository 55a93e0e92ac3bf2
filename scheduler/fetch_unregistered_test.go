package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/scheduler"
)

// Fetch of an unregistered handle, or of a tile of an unpartitioned
// one, fails with ErrUnregistered naming it, as Submit does, without
// devices too: it returned the memory with a nil error, as if the handle
// were still the program's way to the data (devices trial finding).
func TestFetchUnregistered(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1))
	h, err := s.RegisterVector(make([]float64, 8), scheduler.Named("x"))
	require.NoError(t, err)
	tiles, err := h.Partition(scheduler.Blocks(4, 1))
	require.NoError(t, err)
	_, err = tiles[0][0].Fetch(ctx)
	require.NoError(t, err, "a live tile")
	require.NoError(t, h.Unpartition())
	_, err = tiles[0][0].Fetch(ctx)
	require.ErrorIs(t, err, scheduler.ErrUnregistered)
	assert.ErrorContains(t, err, "a tile of an unpartitioned handle")
	_, err = h.Fetch(ctx)
	require.NoError(t, err, "the parent again")
	_, err = h.Unregister(ctx)
	require.NoError(t, err)
	_, err = h.Fetch(ctx)
	require.ErrorIs(t, err, scheduler.ErrUnregistered)
	assert.ErrorContains(t, err, `handle "x" was unregistered`)
}

// A count of simulated devices past any node's (PZ_NSIM=1000000, a size
// given for PZ_SIM_MEMORY by mistake) is refused at once, naming the
// variable, where New stayed busy for minutes making a million devices
// and their workers (devices trial finding); WithSimDevices alike.
func TestTooManySimDevices(t *testing.T) {
	ctx := testCtx(t)
	env := func(k string) string {
		if k == "PZ_NSIM" {
			return "1000000"
		}
		return ""
	}
	_, err := scheduler.New(ctx, scheduler.WithGetenv(env))
	require.ErrorIs(t, err, scheduler.ErrBadOption)
	assert.ErrorContains(t, err, "PZ_NSIM=1000000: at most 256 simulated devices")
	_, err = scheduler.New(ctx, scheduler.WithSimDevices(make([]scheduler.SimDevice, 257)...))
	require.ErrorIs(t, err, scheduler.ErrBadOption)
	assert.ErrorContains(t, err, "257 simulated devices (PZ_NSIM or WithSimDevices): at most 256")
}

// gatedSim is a simulated device whose copies into it, once armed,
// announce themselves and wait for a gate.
type gatedSim struct {
	*accel.Sim
	armed   atomic.Bool
	once    sync.Once
	started chan struct{}
	gate    chan struct{}
}

func (g *gatedSim) CopyIn(dst accel.Mem, off int, src []byte, rows, width, pitch int, done accel.Done) {
	if g.armed.Load() {
		g.once.Do(func() { close(g.started) })
		<-g.gate
	}
	g.Sim.CopyIn(dst, off, src, rows, width, pitch, done)
}

// A task whose CancelOn context ends while its device worker copies its
// data in does not run once they have arrived: it had not started
// (devices trial finding: it ran, 1.5 s after the end, with no error).
func TestCanceledDuringCopyIn(t *testing.T) {
	ctx := testCtx(t)
	sim, err := accel.NewSim(0, accel.SimConfig{Memory: 1 << 20})
	require.NoError(t, err)
	g := &gatedSim{Sim: sim, started: make(chan struct{}), gate: make(chan struct{})}
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithDevices(g))
	dev := simOnly(t, s)
	h, err := s.RegisterVector(make([]float64, 1024))
	require.NoError(t, err)
	var ran atomic.Bool
	cl := &scheduler.Codelet{Name: "late", CPU: func(*scheduler.Call) error { ran.Store(true); return nil }}
	cctx, cancel := context.WithCancelCause(ctx)
	stop := errors.New("stopped during the copy")
	g.armed.Store(true)
	require.NoError(t, s.Submit(ctx, cl, scheduler.RW(h), scheduler.InContext(dev), scheduler.CancelOn(cctx)))
	<-g.started // the worker took the task and copies its data in
	cancel(stop)
	close(g.gate)
	err = s.WaitAll(ctx)
	require.ErrorIs(t, err, scheduler.ErrCanceled)
	assert.ErrorContains(t, err, `task "late" canceled before it started: stopped during the copy`)
	assert.False(t, ran.Load(), "the task ran after its context ended")
}

// gatedOutSim is a simulated device whose copies out of it, once armed,
// each announce themselves on started and wait for a value on gate (or
// its close) before they end. A copy is asynchronous, as on a GPU:
// CopyOut returns at once, and the copy's end (its done function) waits.
type gatedOutSim struct {
	*accel.Sim
	armed   atomic.Bool
	started chan struct{}
	gate    chan struct{}
}

func newGatedOutSim(t *testing.T) *gatedOutSim {
	sim, err := accel.NewSim(0, accel.SimConfig{Memory: 1 << 20})
	require.NoError(t, err)
	return &gatedOutSim{Sim: sim, started: make(chan struct{}, 8), gate: make(chan struct{})}
}

func (g *gatedOutSim) CopyOut(dst []byte, rows, width, pitch int, src accel.Mem, off int, done accel.Done) {
	if g.armed.Load() {
		end := done
		done = func(at time.Time, err error) {
			g.started <- struct{}{}
			<-g.gate
			end(at, err)
		}
	}
	g.Sim.CopyOut(dst, rows, width, pitch, src, off, done)
}

// fillCodelet writes v into every element of its vector.
func fillCodelet(v float64) *scheduler.Codelet {
	return &scheduler.Codelet{Name: fmt.Sprintf("fill%g", v), CPU: func(c *scheduler.Call) error {
		x := scheduler.VectorOf[float64](c, 0)
		for i := range x {
			x[i] = v
		}
		return nil
	}}
}

// submitReturns submits a task on h and fails the test unless Submit
// returns before ctx ends; release runs first then, so that the test's
// cleanup does not wait for a gated copy.
func submitReturns(t *testing.T, ctx context.Context, s *scheduler.Scheduler, h *scheduler.Handle, release func()) {
	t.Helper()
	inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
		scheduler.VectorOf[float64](c, 0)[0]++
		return nil
	}}
	submitted := make(chan error, 1)
	go func() { submitted <- s.Submit(ctx, inc, scheduler.RW(h)) }()
	select {
	case err := <-submitted:
		require.NoError(t, err)
	case <-ctx.Done():
		release()
		t.Fatal("a Submit on another handle waited for Unregister's copy back to RAM")
	}
}

// While Unregister brings a handle's newest data back from a device,
// other handles can still be used: the handles of a scheduler share one
// lock (what every Submit takes to wire its dependencies), and the copy
// back runs outside it.
func TestUnregisterCopyBackLetsOthersSubmit(t *testing.T) {
	ctx := testCtx(t)
	g := newGatedOutSim(t)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithDevices(g))
	dev := simOnly(t, s)
	h, err := s.RegisterVector(make([]float64, 1024))
	require.NoError(t, err)
	other, err := s.RegisterVector(make([]float64, 4))
	require.NoError(t, err)
	tk := scheduler.NewTask(fillCodelet(7), scheduler.W(h), scheduler.InContext(dev))
	require.NoError(t, s.SubmitTask(ctx, tk))
	require.NoError(t, tk.Wait(ctx)) // h's newest data are on the device (WaitAll would bring them back)

	g.armed.Store(true)
	type result struct {
		data any
		err  error
	}
	unreg := make(chan result, 1)
	go func() {
		d, err := h.Unregister(ctx)
		unreg <- result{d, err}
	}()
	<-g.started // Unregister copies h back to RAM
	submitReturns(t, ctx, s, other, func() { close(g.gate) })
	close(g.gate)
	r := <-unreg
	require.NoError(t, r.err)
	assert.Equal(t, 7.0, r.data.([]float64)[1023], "Unregister returns the device's newest data")
	require.NoError(t, s.WaitAll(ctx))
}

// The same when a task writes the handle on the device while
// Unregister's first copy back is in flight: Unregister waits for that
// task, then copies again, still without the lock (helper-106 review
// finding: the second copy ran with it held).
func TestUnregisterSecondCopyBackLetsOthersSubmit(t *testing.T) {
	ctx := testCtx(t)
	g := newGatedOutSim(t)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithDevices(g))
	dev := simOnly(t, s)
	h, err := s.RegisterVector(make([]float64, 1024))
	require.NoError(t, err)
	other, err := s.RegisterVector(make([]float64, 4))
	require.NoError(t, err)
	tk := scheduler.NewTask(fillCodelet(7), scheduler.W(h), scheduler.InContext(dev))
	require.NoError(t, s.SubmitTask(ctx, tk))
	require.NoError(t, tk.Wait(ctx))

	g.armed.Store(true)
	type result struct {
		data any
		err  error
	}
	unreg := make(chan result, 1)
	go func() {
		d, err := h.Unregister(ctx)
		unreg <- result{d, err}
	}()
	<-g.started // the first copy back
	require.NoError(t, s.Submit(ctx, fillCodelet(8), scheduler.W(h), scheduler.InContext(dev)))
	g.gate <- struct{}{} // the first copy ends; the task writes h on the device
	select {
	case <-g.started: // the second copy back
	case <-ctx.Done():
		close(g.gate)
		t.Fatal("no second copy back after a task wrote the handle on the device")
	}
	submitReturns(t, ctx, s, other, func() { close(g.gate) })
	close(g.gate)
	r := <-unreg
	require.NoError(t, r.err)
	assert.Equal(t, 8.0, r.data.([]float64)[0], "Unregister returns the newest data, the second task's")
	require.NoError(t, s.WaitAll(ctx))
}
