//go:build mpi

package mpi

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeTime is a clock that each test of an operation moves by step, and
// a sleep that records its durations and moves the clock by them.
type fakeTime struct {
	t      time.Time
	step   time.Duration
	sleeps []time.Duration
	firstS time.Duration // the clock's reading (since start) at the first sleep
	start  time.Time
	yields int // sched_yield calls
}

func newFakeTime(step time.Duration) *fakeTime {
	t0 := time.Unix(1000, 0)
	return &fakeTime{t: t0, start: t0, step: step}
}

func (f *fakeTime) poller() poller {
	return poller{now: func() time.Time { return f.t }, sleep: func(d time.Duration) {
		if len(f.sleeps) == 0 {
			f.firstS = f.t.Sub(f.start)
		}
		f.sleeps = append(f.sleeps, d)
		f.t = f.t.Add(d)
	}, yield: func() { f.yields++ }}
}

// doneAt returns a test that reports done once the clock reaches at.
func (f *fakeTime) doneAt(at time.Duration) func() (bool, error) {
	return func() (bool, error) {
		f.t = f.t.Add(f.step)
		return f.t.Sub(f.start) >= at, nil
	}
}

// A wait shorter than the spin window never sleeps: a Go sleep lasts
// about a millisecond whatever is asked, which turned ping-pongs with a
// cancelable context into 3 ms round trips. It yields the core to the
// operating system now and then instead.
func TestPollSpinsThroughTheWindow(t *testing.T) {
	f := newFakeTime(time.Microsecond) // each test takes 1 µs
	require.NoError(t, f.poller().poll(context.Background(), 0, f.doneAt(pollSpinWindow*9/10)))
	assert.Empty(t, f.sleeps, "a wait shorter than the window spins")
	tests := int(pollSpinWindow * 9 / 10 / time.Microsecond)
	assert.InDelta(t, (tests-pollSpins)/pollYieldEvery, f.yields, 2, "a yield every %d tests after the first %d", pollYieldEvery, pollSpins)

	// A short wait yields to nobody.
	f = newFakeTime(time.Microsecond)
	require.NoError(t, f.poller().poll(context.Background(), 0, f.doneAt(pollSpins*time.Microsecond)))
	assert.Zero(t, f.yields)

	// A longer wait sleeps, first once the window has passed, with the
	// sleeps doubling up to pollMaxSleep.
	f = newFakeTime(time.Microsecond)
	require.NoError(t, f.poller().poll(context.Background(), 0, f.doneAt(5*pollSpinWindow)))
	require.NotEmpty(t, f.sleeps)
	assert.GreaterOrEqual(t, f.firstS, pollSpinWindow)
	assert.Less(t, f.firstS, pollSpinWindow+pollSpins*time.Microsecond+16*time.Microsecond+time.Microsecond)
	assert.Equal(t, pollMinSleep, f.sleeps[0])
	assert.Equal(t, pollMaxSleep, f.sleeps[len(f.sleeps)-1])

	// An operation moving much data spins as long as its bytes could
	// take (spin), when that is longer than the window.
	f = newFakeTime(time.Microsecond)
	require.NoError(t, f.poller().poll(context.Background(), 3*pollSpinWindow, f.doneAt(5*pollSpinWindow)))
	assert.GreaterOrEqual(t, f.firstS, 3*pollSpinWindow)
}

// A canceled ctx ends the poll, spinning or sleeping.
func TestPollCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := newFakeTime(time.Microsecond)
	n := 0
	err := f.poller().poll(ctx, 0, func() (bool, error) {
		f.t = f.t.Add(f.step)
		if n++; n == 3*int(pollSpinWindow/time.Microsecond) {
			cancel() // after the window: the poll is sleeping between tests
		}
		return false, nil
	})
	assert.ErrorIs(t, err, context.Canceled)
	assert.NotEmpty(t, f.sleeps)
}

// sigErr stands for runtimeview's SignalError: a cause that is a
// cancellation.
type sigErr struct{}

func (sigErr) Error() string        { return "runtimeview: terminated received" }
func (sigErr) Is(target error) bool { return target == context.Canceled }

// TestPollReportsCause: a wait that ctx ends reports ctx's cause (a
// signal's, as comm/local does), still wrapping ctx.Err(); a plain
// cancellation reads as before.
func TestPollReportsCause(t *testing.T) {
	never := func() (bool, error) { return false, nil }
	for _, tc := range []struct {
		cause error
		text  string
	}{
		{nil, "context canceled"},
		{sigErr{}, "runtimeview: terminated received"},
		{errBoomPoll, "context canceled: boom"},
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(tc.cause)
		err := newFakeTime(time.Microsecond).poller().poll(ctx, 0, never)
		assert.ErrorIs(t, err, context.Canceled, "%v", tc.cause)
		if tc.cause != nil {
			assert.ErrorIs(t, err, tc.cause)
		}
		assert.EqualError(t, err, tc.text)
	}
}

var errBoomPoll = errors.New("boom")
