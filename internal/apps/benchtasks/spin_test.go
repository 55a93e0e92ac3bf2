package benchtasks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSpinDeterministicNonZero(t *testing.T) {
	assert.Equal(t, Spin(1000, 5), Spin(1000, 5))
	assert.NotEqual(t, Spin(1000, 5), Spin(1001, 5))
	// One xorshift64 step from 1, computed by hand: x^=x<<13 → 0x2001;
	// x^=x>>7 → 0x2041; x^=x<<17 → 0x40822041.
	assert.Equal(t, uint64(0x40822041), Spin(1, 1))
	for x := range uint64(100) {
		assert.NotZero(t, Spin(10, x))
	}
}

func TestCalibrateSpin(t *testing.T) {
	rate := CalibrateSpin()
	assert.Greater(t, rate, 1.0, "a xorshift step takes well under 1 µs")
	// A 100 µs grain takes at least about 100 µs (it can only be slower
	// on a loaded machine, as CalibrateSpin keeps the fastest timing).
	t0 := time.Now()
	x := Spin(int(100*rate), 3) // used below, so the loop is not dead code
	assert.Greater(t, time.Since(t0), 50*time.Microsecond)
	assert.NotZero(t, x)
}
