package dist_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// TestCloseReportsUnreportedFailure: a task fails on the last rank after
// every rank's Submit returned, and each rank's program calls Close
// without WaitAll (as a program that returns and leaves the graph to
// rt.Close does). Close returned nil on every rank, the failing one
// included, once the rank knew of the failure when Close began: it then
// skipped its wait for the graph, and no call ever reported the failure
// to the program. Now Close reports it, naming the task, once; a second
// Close is a no-op. On 1 to 3 in-process ranks; TestMPICloseReportsUnreportedFailure
// runs the same under mpirun.
func TestCloseReportsUnreportedFailure(t *testing.T) {
	for n := 1; n <= 3; n++ {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			errs := make([]error, n)
			var submitted sync.WaitGroup
			submitted.Add(n)
			barrier := func(context.Context) error {
				submitted.Done()
				submitted.Wait()
				return nil
			}
			err := runRanks(t, n, func(ctx context.Context, d *dist.Scheduler) error {
				errs[d.Rank()] = closeAfterUnreportedFailure(ctx, d, barrier)
				return nil
			})
			require.NoError(t, err)
			for r, err := range errs {
				assert.NoError(t, err, "rank %d", r)
			}
		})
	}
}

// TestCloseReportsFailureAfterUnrelatedError: a task fails on the last
// rank after every rank's Submit returned; each rank then calls WaitAll
// with a context that has already ended, which returns the context's
// error, and then Close. That error did not carry the graph's failure,
// yet it marked the failure told, and Close returned nil: the failure
// reached the program nowhere. Only an error that carries the failure
// tells it now, so Close reports it. On 1 to 3 in-process ranks.
func TestCloseReportsFailureAfterUnrelatedError(t *testing.T) {
	for n := 1; n <= 3; n++ {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			errs, waitErrs := make([]error, n), make([]error, n)
			var submitted sync.WaitGroup
			submitted.Add(n)
			barrier := func(context.Context) error {
				submitted.Done()
				submitted.Wait()
				return nil
			}
			err := runRanks(t, n, func(ctx context.Context, d *dist.Scheduler) error {
				errs[d.Rank()] = closeAfterUnreportedFailureThen(ctx, d, barrier, func(ctx context.Context, d *dist.Scheduler) error {
					ended, cancel := context.WithCancel(ctx)
					cancel()
					waitErrs[d.Rank()] = d.WaitAll(ended)
					return nil
				})
				return nil
			})
			require.NoError(t, err)
			for r, err := range errs {
				t.Logf("rank %d: WaitAll: %v", r, waitErrs[r])
				assert.NoError(t, err, "rank %d", r)
			}
		})
	}
}

// TestCloseAfterReportedFailure: once a call has returned the graph's
// failure to the program (here WaitAll's, the failing task's on another
// rank), Close does not report it again, as the local scheduler's Close
// does not report what WaitAll did.
func TestCloseAfterReportedFailure(t *testing.T) {
	// The task fails once both ranks' Submits returned: rank 0's Submit
	// would otherwise return the failure, when rank 1 ran it first.
	var submitted sync.WaitGroup
	submitted.Add(2)
	boom := &scheduler.Codelet{Name: "boom", CPU: func(*scheduler.Call) error {
		submitted.Wait()
		return errors.New("boom")
	}}
	waitErrs, closeErrs := make([]error, 2), make([]error, 2)
	err := runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
		hs, err := onePerRank[float64](d, 2)
		if err != nil {
			return err
		}
		err = d.Submit(ctx, boom, dist.RW(hs[1]))
		submitted.Done()
		if err != nil {
			return err
		}
		waitErrs[d.Rank()] = d.WaitAll(ctx)
		closeErrs[d.Rank()] = d.Close()
		return nil
	})
	require.NoError(t, err)
	for r := range 2 {
		assert.ErrorIs(t, waitErrs[r], dist.ErrRankFailed, "rank %d's WaitAll", r)
		assert.NoError(t, closeErrs[r], "rank %d's Close", r)
	}
}

// closeAfterUnreportedFailure submits, on every rank of d, a task that
// fails on the last rank once every rank's Submit has returned (barrier,
// which every rank calls after its Submit, returns), waits until this
// rank knows of the failure (dist.GraphFailed), then closes d without
// WaitAll: Close must return the failure (ErrRankFailed, naming the
// task), and a second Close nil.
func closeAfterUnreportedFailure(ctx context.Context, d *dist.Scheduler, barrier func(context.Context) error) error {
	return closeAfterUnreportedFailureThen(ctx, d, barrier, nil)
}

// closeAfterUnreportedFailureThen is closeAfterUnreportedFailure that
// calls between (if not nil) once this rank knows of the failure,
// before Close: a call whose error does not carry the failure leaves it
// for Close to report.
func closeAfterUnreportedFailureThen(ctx context.Context, d *dist.Scheduler, barrier func(context.Context) error, between func(context.Context, *dist.Scheduler) error) error {
	last := d.Size() - 1
	var data []float64
	if d.Rank() == last {
		data = make([]float64, 2)
	}
	h, err := dist.Register(d, last, data, 2, 1)
	if err != nil {
		return err
	}
	gate := make(chan struct{})
	boom := &scheduler.Codelet{Name: "boom", CPU: func(*scheduler.Call) error {
		<-gate
		return errors.New("boom")
	}}
	if err := d.Submit(ctx, boom, dist.RW(h)); err != nil {
		return fmt.Errorf("Submit of a task that has not run failed: %w", err)
	}
	if err := barrier(ctx); err != nil {
		return err
	}
	close(gate) // the task runs on the last rank only
	select {
	case <-dist.GraphFailed(d):
	case <-ctx.Done():
		return fmt.Errorf("the task's failure never reached rank %d: %w", d.Rank(), ctx.Err())
	}
	if between != nil {
		if err := between(ctx, d); err != nil {
			return err
		}
	}
	err = d.Close()
	switch {
	case err == nil:
		return errors.New("Close returned nil: the task's failure, which no call reported, is lost")
	case !errors.Is(err, dist.ErrRankFailed) || !strings.Contains(err.Error(), "no call of the program's reported it"):
		return fmt.Errorf("Close's error is not the graph's failure: %w", err)
	case between == nil && !strings.Contains(err.Error(), `task "boom"`):
		// With between, a rank may hear first that another left in
		// its between call: that is the graph's failure it reports.
		return fmt.Errorf("Close's error is not the task's failure: %w", err)
	}
	if err := d.Close(); err != nil {
		return fmt.Errorf("a second Close: %w", err)
	}
	return nil
}
