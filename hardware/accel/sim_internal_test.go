package accel

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSimSlowLinkNotInstant (trial finding): a link of 1e-300 bytes/s
// copied instantly, as the copy's time overflowed time.Duration to its
// most negative value, and a NaN bandwidth gave instant copies too.
// A copy's time now saturates, and NewSim refuses NaN.
func TestSimSlowLinkNotInstant(t *testing.T) {
	d, err := NewSim(0, SimConfig{Bandwidth: 1e-300, DeviceBandwidth: 1e-300, Latency: time.Millisecond})
	require.NoError(t, err)
	defer d.Close()
	require.Equal(t, time.Duration(math.MaxInt64), d.cost(8))
	require.Equal(t, time.Duration(math.MaxInt64), linkTime(8, d.cfg.DeviceBandwidth, 0))
	require.Equal(t, time.Millisecond+8*time.Second, (&Sim{cfg: SimConfig{Bandwidth: 1, Latency: time.Millisecond}}).cost(8))
	require.Zero(t, linkTime(1<<30, -1, 0), "negative: memory speed")

	for _, c := range []SimConfig{{Bandwidth: math.NaN()}, {DeviceBandwidth: math.NaN()}} {
		_, err := NewSim(1, c)
		require.ErrorContains(t, err, "NaN")
	}
}
