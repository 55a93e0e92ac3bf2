package gantt

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestTicks(t *testing.T) {
	for i, c := range []struct {
		span       time.Duration
		n          int
		step, unit time.Duration
	}{
		{15700 * time.Microsecond, 12, 2 * time.Millisecond, time.Millisecond},
		{12 * time.Millisecond, 12, time.Millisecond, time.Millisecond},
		{950, 10, 100, time.Nanosecond},
		{1200 * time.Millisecond, 10, 200 * time.Millisecond, time.Second},
		{3 * time.Second, 12, 500 * time.Millisecond, time.Second},
		{40 * time.Microsecond, 12, 5 * time.Microsecond, time.Microsecond},
		{0, 12, 1, time.Nanosecond},
		{time.Hour, 0, 2000 * time.Second, time.Second}, // n < 1 counts as 1; 3600/2000 floors to 1
	} {
		step, unit := Ticks(c.span, c.n)
		assert.Equal(t, c.step, step, "case %d", i)
		assert.Equal(t, c.unit, unit, "case %d", i)
		assert.LessOrEqual(t, int(c.span/step), max(c.n, 1), "case %d: at most n intervals", i)
	}
}

func TestFormatTick(t *testing.T) {
	for i, c := range []struct {
		t, step, unit time.Duration
		want          string
	}{
		{0, time.Millisecond, time.Millisecond, "0"},
		{2 * time.Millisecond, 2 * time.Millisecond, time.Millisecond, "2 ms"},
		{1500 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, "1.5 ms"},
		{time.Second, 500 * time.Millisecond, time.Second, "1 s"},
		{200 * time.Microsecond, 20 * time.Microsecond, time.Millisecond, "0.2 ms"},
		{250 * time.Microsecond, 50 * time.Microsecond, time.Microsecond, "250 µs"},
		{300, 100, time.Nanosecond, "300 ns"},
	} {
		assert.Equal(t, c.want, FormatTick(c.t, c.step, c.unit), "case %d", i)
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                        "0",
		812 * time.Microsecond:   "812 µs",
		1250 * time.Microsecond:  "1.25 ms",
		15700 * time.Microsecond: "15.7 ms",
		3500 * time.Millisecond:  "3.50 s",
		42:                       "42.0 ns",
	} {
		assert.Equal(t, want, formatDuration(d), fmt.Sprint(int64(d)))
	}
}

func TestUtilization(t *testing.T) {
	bars := []Bar{
		{Start: 0, End: 10},
		{Start: 5, End: 15}, // overlaps the first: counted once
		{Start: 30, End: 40},
		{Start: 90, End: 120}, // past t1: clipped
	}
	assert.InDelta(t, 0.35, Utilization(bars, 0, 100), 1e-12)
	assert.InDelta(t, 0.0, Utilization(nil, 0, 100), 1e-12)
	assert.InDelta(t, 0.0, Utilization(bars, 50, 50), 1e-12)
	assert.InDelta(t, 1.0, Utilization(bars, 0, 10), 1e-12)
}
