package comm

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestSetPollSpinsThroughTheWindow: a set of requests without Done
// channels is tested (with a Gosched between tests) until setSpinWindow
// has passed on the poller's clock, and only then does the loop sleep,
// from setMinSleep doubling to setMaxSleep.
func TestSetPollSpinsThroughTheWindow(t *testing.T) {
	var clock time.Time
	var sleeps []time.Duration
	p := setPoller{
		now:   func() time.Time { clock = clock.Add(10 * time.Microsecond); return clock },
		sleep: func(d time.Duration) { sleeps = append(sleeps, d) },
	}
	tests, sleptAt := 0, -1
	const doneAfter = 20000
	err := p.poll(context.Background(), "WaitAny", func() bool {
		tests++
		if len(sleeps) > 0 && sleptAt < 0 {
			sleptAt = tests
		}
		return tests == doneAfter
	})
	if err != nil {
		t.Fatal(err)
	}
	if tests != doneAfter {
		t.Fatalf("poll returned after %d tests, want %d", tests, doneAfter)
	}
	// The clock moves 10 µs per reading and is read once per 16 tests past
	// setSpins: the window lasts about 16*setSpinWindow/10µs tests.
	minTests := setSpins + 16*int(setSpinWindow/(10*time.Microsecond)) - 32
	if sleptAt < 0 || sleptAt < minTests {
		t.Fatalf("first sleep after %d tests, want none before about %d (the %v window)", sleptAt, minTests, setSpinWindow)
	}
	if sleeps[0] != setMinSleep {
		t.Errorf("first sleep %v, want %v", sleeps[0], setMinSleep)
	}
	for i := 1; i < len(sleeps); i++ {
		if want := min(2*sleeps[i-1], setMaxSleep); sleeps[i] != want {
			t.Fatalf("sleep %d is %v after %v, want %v", i, sleeps[i], sleeps[i-1], want)
		}
	}
}

// TestSetPollCanceled: a canceled context ends the loop with its cause.
func TestSetPollCanceled(t *testing.T) {
	cause := errors.New("stop")
	ctx, cancel := context.WithCancelCause(context.Background())
	tests := 0
	p := setPoller{now: time.Now, sleep: func(time.Duration) {}}
	err := p.poll(ctx, "WaitSome", func() bool {
		tests++
		if tests == 100 {
			cancel(cause)
		}
		return false
	})
	if !errors.Is(err, cause) || tests != 100 {
		t.Fatalf("poll = %v after %d tests, want %v after 100", err, tests, cause)
	}
}
