package scheduler_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestReduxAfterPartlyFailedGroup: a group of Redux tasks one of which
// failed combines none of its contributions; the next group's
// reduction, after a W starts anew, combines its own only.
func TestReduxAfterPartlyFailedGroup(t *testing.T) {
	for _, devs := range []bool{false, true} {
		opts := []scheduler.Option{scheduler.WithWorkers(1)}
		if devs {
			// The copies on the device, whose memory they hold.
			opts = []scheduler.Option{scheduler.WithWorkers(1), scheduler.WithSimDevices(scheduler.SimDevice{Memory: 64, Workers: 2})}
		}
		reduxAfterPartlyFailedGroup(t, opts)
	}
}

func reduxAfterPartlyFailedGroup(t *testing.T, opts []scheduler.Option) {
	ctx := testCtx(t)
	s := newSched(t, opts...)
	var x uint64
	h, err := s.RegisterValue(&x, scheduler.Named("x"))
	require.NoError(t, err)
	zero := &scheduler.Codelet{Name: "zero", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*uint64](c, 0) = 0
		return nil
	}}
	add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*uint64](c, 0) += *scheduler.ValueOf[*uint64](c, 1)
		return nil
	}}
	require.NoError(t, h.SetReduction(zero, add))
	addK := &scheduler.Codelet{Name: "addk", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*uint64](c, 0) += uint64(c.Arg.(int))
		return nil
	}}
	boom := &scheduler.Codelet{Name: "boom", CPU: func(*scheduler.Call) error { return errors.New("contribution failed") }}
	set := &scheduler.Codelet{Name: "set", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*uint64](c, 0) = 100
		return nil
	}}
	for round := range 20 {
		// Contributions of 5 on whichever workers run them, one failing.
		for range 4 {
			require.NoError(t, s.Submit(ctx, addK, scheduler.Redux(h), scheduler.WithArg(5)))
		}
		require.NoError(t, s.Submit(ctx, boom, scheduler.Redux(h)))
		require.ErrorContains(t, s.WaitAll(ctx), "contribution failed")
		require.NoError(t, s.Submit(ctx, set, scheduler.W(h)))
		for range 3 {
			require.NoError(t, s.Submit(ctx, addK, scheduler.Redux(h), scheduler.WithArg(1)))
		}
		require.NoError(t, s.WaitAll(ctx))
		v, err := h.Fetch(ctx)
		require.NoError(t, err)
		require.Equal(t, uint64(103), *v.(*uint64), "round %d: the failed group's contributions were combined into the next group's", round)
	}
}
