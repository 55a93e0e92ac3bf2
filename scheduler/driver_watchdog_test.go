package scheduler_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestDriverSubmitRunningTaskInWatchdogReport: a task that Driver.Submit
// runs at once (past the submit limit, a codelet with no data) is named
// by the watchdog's report while it runs, as a queued task would be.
// Before, Submit ran it as a plain call that told the watchdog nothing:
// a stall report while it ran named no running task on the driven
// worker.
func TestDriverSubmitRunningTaskInWatchdogReport(t *testing.T) {
	ctx := testCtx(t)
	report, ch := stallReports()
	s, d := drivenSched(t, 1, scheduler.WithWatchdog(20*time.Millisecond, report))
	d.SetSubmitLimit(1)
	idle := &scheduler.Codelet{Name: "idle", CPU: func(*scheduler.Call) error { return nil }}
	// Two queued for the driven worker (at most the limit in flight):
	// nothing runs them while the test's goroutine is in Submit.
	require.NoError(t, d.Submit(ctx, idle))
	require.NoError(t, d.Submit(ctx, idle))
	stuck := &scheduler.Codelet{Name: "stuck", CPU: func(c *scheduler.Call) error {
		timeout := time.After(time.Minute)
		for {
			select {
			case st := <-ch:
				for _, r := range st.Running {
					if r.Codelet == "stuck" && r.Worker == c.Worker {
						return nil
					}
				}
			case <-timeout:
				return errors.New("no stall report named the running task")
			}
		}
	}}
	require.NoError(t, d.Submit(ctx, stuck)) // runs at once: two tasks in flight
	require.NoError(t, d.WaitAll(ctx))
	require.Equal(t, int64(3), s.Stats()[0].Tasks)
}
