package scheduler_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// After Close the registered data stay the program's: Close brought
// every handle's newest data back to RAM, so Data, Fetch and Unregister
// return them (with devices too) and WaitAll has nothing to wait for,
// while what would start work (Submit, Partition, registering) fails
// with ErrClosed, as Close's documentation says.
func TestHandlesAfterClose(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPerfModelDir(""),
		scheduler.WithGetenv(func(string) string { return "" }), scheduler.WithSimDevices(scheduler.SimDevice{}))
	require.NoError(t, err)
	dev := simOnly(t, s)
	v := make([]float64, 64)
	h, err := s.RegisterVector(v)
	require.NoError(t, err)
	w, err := s.RegisterVector(make([]float64, 64))
	require.NoError(t, err)
	// The newest data of both are on the device when Close is called.
	require.NoError(t, s.Submit(ctx, fillCodelet(3), scheduler.W(h), scheduler.InContext(dev)))
	require.NoError(t, s.Submit(ctx, fillCodelet(5), scheduler.W(w), scheduler.InContext(dev)))
	require.NoError(t, s.Close())

	require.NoError(t, s.WaitAll(ctx))
	got, err := h.Fetch(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3.0, got.([]float64)[63])
	assert.Equal(t, 3.0, h.Data().([]float64)[0])
	data, err := w.Unregister(ctx)
	require.NoError(t, err)
	assert.Equal(t, 5.0, data.([]float64)[10])

	err = s.Submit(ctx, fillCodelet(1), scheduler.W(h))
	assert.ErrorIs(t, err, scheduler.ErrClosed)
	_, err = h.Partition(scheduler.Blocks(8, 1))
	assert.ErrorIs(t, err, scheduler.ErrClosed)
	_, err = s.RegisterVector(make([]float64, 4))
	assert.ErrorIs(t, err, scheduler.ErrClosed)
}
