package c2c_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/internal/c2c"
)

func TestRoundTrip(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU")
	}
	d, err := c2c.RoundTrip(2000)
	require.NoError(t, err)
	// A round trip is two cache-line transfers: more than a few
	// nanoseconds on any machine, far less than a scheduling quantum.
	assert.Greater(t, d, 5*time.Nanosecond)
	assert.Less(t, d, 100*time.Microsecond)
}

func TestRoundTripOneCore(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	_, err := c2c.RoundTrip(10)
	assert.ErrorIs(t, err, c2c.ErrOneCore)
}
