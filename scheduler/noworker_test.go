package scheduler_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestLastDriverEndedWaitAllReturns: when the last worker leaves the
// scheduler (every worker driven, every driver ended) with tasks queued,
// they are canceled at once, so that a WaitAll without a deadline - one
// already waiting, or one called after - returns their errors. It
// waited for ever (only Close canceled them), and so did a layer that
// waits as WaitAll does before its own Close: scheduler/dist's, under a
// RuntimeView whose ranks' only workers were driven (found by the
// examples trial: leibniz hung on Ctrl-C).
func TestLastDriverEndedWaitAllReturns(t *testing.T) {
	for _, waitFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "waiting", false: "after"}[waitFirst], func(t *testing.T) {
			ctx := testCtx(t)
			s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithDrivenWorkers(1), scheduler.WithPerfModelDir(""))
			require.NoError(t, err)
			d, err := s.Driver(0)
			require.NoError(t, err)
			require.NoError(t, d.Init())
			first := scheduler.NewTask(clEmpty)
			require.NoError(t, s.SubmitTask(ctx, first))
			for range 4 {
				require.NoError(t, s.Submit(ctx, clEmpty, scheduler.After(first)))
			}
			waited := make(chan error, 1)
			wait := func() { waited <- s.WaitAll(context.Background()) } // no deadline
			if waitFirst {
				go wait()
			}
			require.NoError(t, d.Deinit())
			if !waitFirst {
				go wait()
			}
			var werr error
			select {
			case werr = <-waited:
			case <-ctx.Done():
				t.Fatal("WaitAll did not return after the last driver ended")
			}
			require.ErrorIs(t, werr, scheduler.ErrCanceled)
			assert.ErrorContains(t, werr, "5 tasks not run")
			assert.ErrorContains(t, werr, "canceled when the last worker left the scheduler")
			assert.ErrorContains(t, werr, "no worker is left to run it")
			assert.ErrorContains(t, werr, "worker 0 was driven by the application (WithDrivenWorkers) and its driver ended")
			require.ErrorIs(t, first.Err(), scheduler.ErrDriver)
			require.NoError(t, s.WaitAll(ctx), "each error once")
			require.NoError(t, s.Close())
		})
	}
}
