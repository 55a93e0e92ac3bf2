package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWatchdogTick drives the watchdog's decision with a clock of its
// own: no report while a task finishes within the timeout, a report once
// none has for the timeout, the next after twice as long, and the count
// started again by a finished task.
func TestWatchdogTick(t *testing.T) {
	ctx := context.Background()
	// An hour's timeout: the watchdog's own goroutine never looks during
	// the test, only the calls to tick below do.
	s, err := New(ctx, WithWorkers(1), WithPerfModelDir(""), WithWatchdog(time.Hour, func(Stall) {}))
	require.NoError(t, err)
	defer s.Close()
	wd := s.wd
	require.NotNil(t, wd)

	hold := func() (release func()) {
		started, gate := make(chan struct{}), make(chan struct{})
		cl := &Codelet{Name: "held", CPU: func(*Call) error { close(started); <-gate; return nil }}
		require.NoError(t, s.Submit(ctx, cl))
		<-started
		return func() { close(gate); require.NoError(t, s.WaitAll(ctx)) }
	}

	_, ok := wd.tick(0)
	assert.False(t, ok, "nothing in flight")
	release := hold()
	base := time.Duration(s.now())
	_, ok = wd.tick(base + 59*time.Minute)
	assert.False(t, ok, "before the timeout")
	st, ok := wd.tick(base + 61*time.Minute)
	require.True(t, ok, "no task finished for the timeout")
	assert.Equal(t, int64(1), st.InFlight)
	require.Len(t, st.Running, 1)
	assert.Equal(t, "held", st.Running[0].Codelet)
	assert.Equal(t, 0, st.Running[0].Worker)
	assert.GreaterOrEqual(t, st.Running[0].For, 61*time.Minute)
	assert.Empty(t, st.Causes)
	assert.Contains(t, st.String(), `1 task in flight; running: worker 0 (cpu) "held" for 1h1m`)

	_, ok = wd.tick(base + 100*time.Minute)
	assert.False(t, ok, "the next report is due after twice the timeout")
	st, ok = wd.tick(base + 121*time.Minute)
	require.True(t, ok)
	assert.GreaterOrEqual(t, st.For, 2*time.Hour)

	release()
	// The worker publishes its completion before it sleeps; the
	// watchdog's count is the worker's own, at once.
	_, ok = wd.tick(base + 122*time.Minute)
	assert.False(t, ok, "a task finished")
	release = hold()
	defer release()
	_, ok = wd.tick(base + 122*time.Minute + 59*time.Minute)
	assert.False(t, ok, "the count started again at the timeout")
	st, ok = wd.tick(base + 122*time.Minute + 61*time.Minute)
	require.True(t, ok)
	assert.Less(t, st.For, 2*time.Hour)
}

// TestWatchdogSettings: PZ_WATCHDOG turns the watchdog on, "0" leaves it
// off, and WithWatchdog takes precedence over it.
func TestWatchdogSettings(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		env  string
		opts []Option
		want time.Duration // 0: off
	}{
		{"", nil, 0},
		{"0", nil, 0},
		{"90s", nil, 90 * time.Second},
		{"90s", []Option{WithWatchdog(0, nil)}, 0},
		{"", []Option{WithWatchdog(time.Minute, nil)}, time.Minute},
		{"90s", []Option{WithWatchdog(time.Minute, nil)}, time.Minute},
	} {
		env := func(k string) string {
			if k == "PZ_WATCHDOG" {
				return c.env
			}
			return ""
		}
		s, err := New(ctx, append([]Option{WithGetenv(env), WithWorkers(1), WithPerfModelDir("")}, c.opts...)...)
		require.NoError(t, err)
		if c.want == 0 {
			assert.Nil(t, s.wd, "PZ_WATCHDOG=%q", c.env)
		} else if assert.NotNil(t, s.wd, "PZ_WATCHDOG=%q", c.env) {
			assert.Equal(t, c.want, s.wd.timeout)
		}
		require.NoError(t, s.Close())
	}
}
