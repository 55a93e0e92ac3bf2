package dist

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRankLinkObserve: a rank's link prices a task from its ping
// (2 latencies and the bytes both ways), times a factor that the first
// tasks' measured transfers set as their mean, and that a later task
// moves by an eighth of its difference, one task's ratio bounded to 4
// times the factor either way.
func TestRankLinkObserve(t *testing.T) {
	l := newRankLink(1000, 1) // 1 µs, 1 ns per byte
	assert.Equal(t, 2000.0+200, l.Cost(100, 100))
	for _, r := range []float64{5, 15, 5, 15} {
		l.observe(100, 100, r*2200)
	}
	assert.Equal(t, 10*2200.0, l.Cost(100, 100), "the mean of the first four ratios")
	l.observe(100, 100, 1000*2200) // a pause: bounded to 40
	assert.InDelta(t, (10+30.0/8)*2200, l.Cost(100, 100), 1e-6)
	l.observe(100, 100, 0) // no measurement (a clock that did not move)
	assert.InDelta(t, (10+30.0/8)*2200, l.Cost(100, 100), 1e-6)
}
