package scheduler

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestModelEntryAddGuards: the running mean never divides by a count of
// 0 or less - a count that would wrap past 2^63 saturates, a negative one
// (never loaded, see validEntry) starts afresh - and values that are not
// durations are ignored, so the mean and variance stay finite.
func TestModelEntryAddGuards(t *testing.T) {
	e := modelEntry{n: math.MaxInt64, mean: 100}
	e.add(140)
	assert.Equal(t, int64(math.MaxInt64), e.n)
	assert.InDelta(t, 100, e.mean, 1e-6)

	e = modelEntry{n: -1, mean: 5, m2: 3}
	e.add(7)
	assert.Equal(t, modelEntry{n: 1, mean: 7}, e)

	for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1} {
		e.add(x)
	}
	assert.Equal(t, modelEntry{n: 1, mean: 7}, e)
	e.add(9)
	assert.Equal(t, int64(2), e.n)
	assert.Equal(t, 8.0, e.mean)
	assert.Equal(t, 2.0, e.m2)
}

// TestModelEntryLeavesOutOutliers: once calibrated, an entry leaves out a
// measurement 1.5 times away from the mean, slower (a garbage
// collection's pause) or faster, and three standard deviations away;
// once as many are left out as kept, the times have changed and the entry
// starts again from the latest. Times that scatter widely anyway (a tiny
// task) and measurements before calibration all count.
func TestModelEntryLeavesOutOutliers(t *testing.T) {
	var e modelEntry
	for range 10 {
		e.add(1000)
	}
	e.add(20000) // a pause while the task ran
	e.add(600)   // faster than a third off the mean
	assert.Equal(t, int64(10), e.n)
	assert.Equal(t, 1000.0, e.mean)
	e.add(1400) // within the bound: kept
	assert.Equal(t, int64(11), e.n)

	// The machine gets three times slower: after as many outliers as
	// measurements kept (2 so far, 9 more), the entry starts again.
	for range 8 {
		e.add(3000)
	}
	assert.Equal(t, int64(11), e.n, "still the old times")
	e.add(3000)
	assert.Equal(t, modelEntry{n: 1, mean: 3000}, e)
	for range 9 {
		e.add(3000)
	}
	assert.Equal(t, int64(10), e.n)
	assert.Equal(t, 3000.0, e.mean)

	// A tiny task's times scatter: 100 and 300 ns (mean 200, deviation
	// 100); 350 is 1.75 times the mean but within 3 deviations.
	e = modelEntry{}
	for i := range 10 {
		e.add(float64(100 + 200*(i%2)))
	}
	e.add(350)
	assert.Equal(t, int64(11), e.n, "kept")

	// Before calibration every measurement counts, a cold first one too.
	e = modelEntry{}
	e.add(50000)
	e.add(1000)
	assert.Equal(t, int64(2), e.n)
}

// TestFileSafe: the model file names are one to one with the model
// names, and a name of letters, digits, '.', '-' and '_' is its own
// file name, as in earlier versions.
func TestFileSafe(t *testing.T) {
	for in, want := range map[string]string{
		"gemm":        "gemm",
		"trial.work":  "trial.work",
		"a_b-c.D9":    "a_b-c.D9",
		"a/b":         "a%2Fb",
		"a%2Fb":       "a%252Fb",
		"a b":         "a%20b",
		"10µs":        "10%C2%B5s",
		"../x":        "..%2Fx",
		"1.6e+10":     "1.6e%2B10",
		"\x00":        "%00",
		"C:\\x":       "C%3A%5Cx",
		"sim-1-2-3µs": "sim-1-2-3%C2%B5s",
	} {
		assert.Equal(t, want, fileSafe(in), "%q", in)
	}
	seen := map[string]string{}
	for _, n := range []string{"a/b", "a_b", "a b", "a%2Fb", "a%2fb", "a\\b", "a:b", "a%b", "a%25b", "ab", "a.b", "a-b"} {
		f := fileSafe(n)
		if prev, ok := seen[f]; ok {
			t.Errorf("%q and %q share the file name %q", prev, n, f)
		}
		seen[f] = n
	}
	assert.Equal(t, "a_b", legacyFileSafe("a/b"))
}
