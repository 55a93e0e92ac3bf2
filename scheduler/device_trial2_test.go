package scheduler_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestDeviceFullOfReductionCopiesHeadline: a task whose data fit the
// device, but not beside the Redux copies not yet combined there, failed
// with "task "work"'s data do not fit on sim0 beside memory this scheduler
// does not hold" while the same message said that others held 0 bytes:
// the headline blamed memory of others when the scheduler's own
// reduction copies held the room (found in helper-137's new-user trial,
// a random graph on a small device in a context of device workers). The
// headline now names the reduction copies when nothing else holds the
// device's memory.
func TestDeviceFullOfReductionCopiesHeadline(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{Memory: 1 << 20}))
	dev := scheduler.InContext(simOnly(t, s))
	vec := func(name string, n int) *scheduler.Handle {
		h, err := s.RegisterVector(make([]float64, n), scheduler.Named(name))
		require.NoError(t, err)
		return h
	}
	const q = 1 << 15 // 256 KiB of float64
	ha, hx, hy := vec("a", 2*q), vec("x", q), vec("y", 2*q)
	zero := &scheduler.Codelet{Name: "zero", CPU: func(c *scheduler.Call) error {
		clear(scheduler.VectorOf[float64](c, 0))
		return nil
	}}
	add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error { return nil }}
	require.NoError(t, ha.SetReduction(zero, add))
	one := &scheduler.Codelet{Name: "one", CPU: func(*scheduler.Call) error { return nil }}
	red := scheduler.NewTask(one, scheduler.Redux(ha), dev)
	require.NoError(t, s.SubmitTask(ctx, red))
	require.NoError(t, s.Wait(ctx, red))

	// x and y: 768 KiB, beside a's copy of 512 KiB on a 1 MiB device.
	w := scheduler.NewTask(one, scheduler.R(hx), scheduler.RW(hy), dev)
	require.NoError(t, s.SubmitTask(ctx, w))
	err := s.Wait(ctx, w)
	require.ErrorIs(t, err, scheduler.ErrDeviceMemory)
	msg := err.Error()
	require.NotContains(t, msg, "beside memory this scheduler does not hold", msg)
	require.Contains(t, msg, `task "one"'s data do not fit on sim0 beside the reduction copies not yet combined there`, msg)
	require.Contains(t, msg, `reduction copies not yet combined hold 524288 bytes (handle "a": 1 copy)`, msg)
}
