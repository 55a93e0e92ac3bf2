package c2c_test

import (
	"errors"
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
	d, err := c2c.RoundTrip(200, time.Minute)
	require.NoError(t, err)
	// A round trip is two cache-line transfers: more than a few
	// nanoseconds on any machine; on a loaded one (the race detector,
	// other tests) a few scheduling quanta at most per trip.
	assert.Greater(t, d, 5*time.Nanosecond)
	assert.Less(t, d, 100*time.Millisecond)
}

// A budget the round trips cannot meet ends the measurement with
// ErrBusy, and both threads leave (the test would hang otherwise).
func TestRoundTripBudget(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU")
	}
	_, err := c2c.RoundTrip(1<<30, time.Millisecond)
	assert.ErrorIs(t, err, c2c.ErrBusy)
}

func TestRoundTripOneCore(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	_, err := c2c.RoundTrip(10, time.Second)
	assert.ErrorIs(t, err, c2c.ErrOneCore)
}

// BenchmarkRoundTrip reports the round trip (ns/op is per round trip);
// with -count N it samples the machine's phases:
//
//	go test -run '^$' -bench RoundTrip -count 16 ./internal/c2c/
func BenchmarkRoundTrip(b *testing.B) {
	d, err := c2c.RoundTrip(b.N, time.Minute)
	if errors.Is(err, c2c.ErrOneCore) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(d.Nanoseconds()), "ns/trip")
}
