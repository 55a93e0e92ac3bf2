package scheduler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/pzgo/pz/scheduler"
)

// stallReports returns a WithWatchdog report function and the channel
// its reports arrive on (those that find it full are dropped).
func stallReports() (func(scheduler.Stall), <-chan scheduler.Stall) {
	ch := make(chan scheduler.Stall, 16)
	return func(st scheduler.Stall) {
		select {
		case ch <- st:
		default:
		}
	}, ch
}

// awaitStall waits for the next report, failing the test after a minute.
func awaitStall(t *testing.T, ch <-chan scheduler.Stall) scheduler.Stall {
	t.Helper()
	select {
	case st := <-ch:
		return st
	case <-time.After(time.Minute):
		t.Fatal("no stall reported")
		return scheduler.Stall{}
	}
}

// awaitRunningStall waits for a report that names a running task: on a
// loaded machine the watchdog can report before a worker has taken the
// task (then again after twice as long, and so on).
func awaitRunningStall(t *testing.T, ch <-chan scheduler.Stall) scheduler.Stall {
	t.Helper()
	for {
		if st := awaitStall(t, ch); len(st.Running) > 0 {
			return st
		}
	}
}

// TestWatchdogReportsARunningTask: a task that runs on and on is named,
// with its worker, in the report, and WaitAll completes once it ends.
func TestWatchdogReportsARunningTask(t *testing.T) {
	ctx := context.Background()
	report, ch := stallReports()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPerfModelDir(""),
		scheduler.WithWatchdog(20*time.Millisecond, report))
	require.NoError(t, err)
	defer s.Close()
	gate := make(chan struct{})
	slow := &scheduler.Codelet{Name: "slow", CPU: func(*scheduler.Call) error { <-gate; return nil }}
	h, err := s.RegisterVector(make([]float64, 4))
	require.NoError(t, err)
	require.NoError(t, s.Submit(ctx, slow, scheduler.RW(h)))
	require.NoError(t, s.Submit(ctx, clTouch1, scheduler.RW(h))) // waits for slow
	// A report can fall between the two submissions (the test's
	// goroutine descheduled for 20 ms): wait for one that counts both.
	st := awaitRunningStall(t, ch)
	for st.InFlight < 2 {
		st = awaitRunningStall(t, ch)
	}
	assert.GreaterOrEqual(t, st.For, 20*time.Millisecond)
	assert.Equal(t, int64(2), st.InFlight)
	require.Len(t, st.Running, 1)
	assert.Equal(t, "slow", st.Running[0].Codelet)
	assert.Equal(t, scheduler.CPUWorker, st.Running[0].Kind)
	assert.Empty(t, st.Causes)
	assert.Contains(t, st.String(), `2 tasks in flight; running: worker `)
	close(gate)
	require.NoError(t, s.WaitAll(ctx))
}

// TestWatchdogNamesWhatTasksWaitFor: a task waiting for a tag that no
// task carries is named among the causes, and Close cancels it.
func TestWatchdogNamesWhatTasksWaitFor(t *testing.T) {
	ctx := context.Background()
	report, ch := stallReports()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPerfModelDir(""),
		scheduler.WithWatchdog(20*time.Millisecond, report))
	require.NoError(t, err)
	require.NoError(t, s.Submit(ctx, clEmpty, scheduler.AfterTags(7)))
	st := awaitStall(t, ch)
	assert.Equal(t, int64(1), st.InFlight)
	assert.Empty(t, st.Running)
	require.NotEmpty(t, st.Causes)
	assert.ErrorIs(t, st.Causes[0], scheduler.ErrNotSubmitted)
	assert.Contains(t, st.String(), "none running; ")
	assert.Contains(t, st.String(), "for tag 7, which no submitted task carries")
	assert.ErrorIs(t, s.Close(), scheduler.ErrCanceled)
}

// TestWatchdogLogs: without a report function the stall is a Warn on
// the scheduler's logger.
func TestWatchdogLogs(t *testing.T) {
	ctx := context.Background()
	entries := make(chan zapcore.Entry, 16)
	core, logs := observer.New(zap.WarnLevel)
	log := zap.New(core, zap.Hooks(func(e zapcore.Entry) error {
		select {
		case entries <- e:
		default:
		}
		return nil
	}))
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPerfModelDir(""), scheduler.WithLogger(log),
		scheduler.WithWatchdog(20*time.Millisecond, nil))
	require.NoError(t, err)
	defer s.Close()
	gate := make(chan struct{})
	require.NoError(t, s.Submit(ctx, &scheduler.Codelet{Name: "slow", CPU: func(*scheduler.Call) error { <-gate; return nil }}))
	// The first entries can come before the worker has taken the task.
	var f map[string]any
	for n := 0; f == nil || f["running"] == ""; n++ {
		select {
		case <-entries:
		case <-time.After(time.Minute):
			t.Fatal("nothing logged")
		}
		e := logs.All()[n]
		assert.Equal(t, "scheduler watchdog: no task finished", e.Message)
		f = e.ContextMap()
	}
	close(gate)
	require.NoError(t, s.WaitAll(ctx))
	assert.Equal(t, int64(1), f["in_flight"])
	assert.True(t, strings.Contains(f["running"].(string), `"slow"`), f["running"])
}

// TestWatchdogOptions feeds the watchdog's bad settings.
func TestWatchdogOptions(t *testing.T) {
	ctx := context.Background()
	_, err := scheduler.New(ctx, scheduler.WithWatchdog(-time.Second, nil))
	assert.ErrorIs(t, err, scheduler.ErrBadOption)
	assert.ErrorContains(t, err, "WithWatchdog(-1s)")
	for _, v := range []string{"ten seconds", "-5s", "10"} {
		env := func(k string) string {
			if k == "PZ_WATCHDOG" {
				return v
			}
			return ""
		}
		_, err := scheduler.New(ctx, scheduler.WithGetenv(env), scheduler.WithPerfModelDir(""))
		assert.ErrorIs(t, err, scheduler.ErrBadOption, v)
		assert.ErrorContains(t, err, "PZ_WATCHDOG="+`"`+v+`"`)
	}
}
