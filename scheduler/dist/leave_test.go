package dist_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// longStall is the stall timeout of the tests of ranks that leave
// WaitAll: far beyond their deadlines, so that a wait it would have
// ended fails them instead.
const longStall = time.Hour

// windowTask is the task of submitWindow.
var windowTask = &scheduler.Codelet{Name: "window", CPU: func(*scheduler.Call) error { return nil }}

// submitWindow submits one window of the graph check (dist.CheckWindow
// tasks writing h): the last Submit starts the window's comparison.
func submitWindow(ctx context.Context, d *dist.Scheduler, h *dist.Handle) error {
	for i := range dist.CheckWindow {
		if err := d.Submit(ctx, windowTask, dist.RW(h)); err != nil {
			return fmt.Errorf("submission %d: %w", i, err)
		}
	}
	return nil
}

// leaveAhead is rank 1's part of the graph of
// TestLeaverMissesComparison and its MPI variant: it submits a window
// (starting comparison 0, which rank 0 has not joined yet), then calls
// WaitAll with a context that has ended: its wait for that comparison
// ends at once, and it leaves WaitAll having started no other one. It
// returns WaitAll's error.
func leaveAhead(ctx context.Context, d *dist.Scheduler, h *dist.Handle) error {
	if err := submitWindow(ctx, d, h); err != nil {
		return err
	}
	lctx, cancel := context.WithCancel(ctx)
	cancel()
	return d.WaitAll(lctx)
}

// checkLeftBehind checks rank 0's side of TestLeaverMissesComparison and
// its MPI variant: WaitAll (whose context had deadline left) returned
// ErrRankFailed naming rank 1, which left WaitAll, not the stall timeout,
// nor its deadline.
func checkLeftBehind(t *testing.T, waitErr, deadline error) {
	t.Helper()
	require.NoError(t, deadline, "rank 0's WaitAll waited for its deadline: %v", waitErr)
	require.ErrorIs(t, waitErr, dist.ErrRankFailed)
	assert.ErrorContains(t, waitErr, "rank 1 left WaitAll")
	assert.NotErrorIs(t, waitErr, dist.ErrStalled)
	assert.NotErrorIs(t, waitErr, dist.ErrGraphMismatch, "the graphs differ only because rank 1 left")
}

// A rank that leaves WaitAll before it has started the comparison of the
// ranks' graphs that another rank then waits in, and lingers (neither
// closes nor returns), ends that rank's WaitAll at once with
// ErrRankFailed naming it: its departure says how many comparisons it
// started. Before, the other rank waited for its stall timeout, as the
// departure of a rank that may have joined the comparison cannot end
// it. Rank 1 leaves ahead (leaveAhead); rank 0, told only then to go
// on, submits its window (comparison 0 completes: rank 1 took part) and
// calls WaitAll, whose comparison of its last window rank 1 never
// starts. Rank 0's control messages are held back until its
// submissions are done, so that its Submit does not hear of the
// departure first; then it hears of it before its WaitAll compares (it
// must not start that comparison at all: under MPI the collective would
// be left unmatched, for MPI_Finalize to wait for), or while it waits
// in the comparison.
func TestLeaverMissesComparison(t *testing.T) {
	for _, tc := range []struct {
		name            string
		hearWhenWaiting bool // open the gate once rank 0 starts its second comparison
		comparisons     int  // rank 0 starts
	}{
		{"heard before comparing", false, 1},
		{"heard while comparing", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			left, done, gate := make(chan struct{}), make(chan struct{}), make(chan struct{})
			var leftErr, waitErr, deadline error
			started := 0 // rank 0's comparisons
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
				ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
				if err != nil {
					return err
				}
				defer ls.Close()
				spy := &spyComm{Comm: c}
				if c.Rank() == 0 {
					spy = &spyComm{Comm: c, gate: gate, started: func() {
						if started++; started == 2 && tc.hearWhenWaiting {
							close(gate)
						}
					}}
				}
				d, err := dist.New(ctx, spy, ls, dist.WithStallTimeout(longStall))
				if err != nil {
					return err
				}
				defer d.Close()
				hs, err := onePerRank[int64](d, 4)
				if err != nil {
					return err
				}
				if c.Rank() == 1 {
					leftErr = leaveAhead(ctx, d, hs[0])
					close(left)
					select { // it lingers until rank 0's WaitAll returned
					case <-done:
						return nil
					case <-ctx.Done():
						return fmt.Errorf("rank 1 waiting for rank 0: %w", ctx.Err())
					}
				}
				defer close(done)
				select {
				case <-left:
				case <-ctx.Done():
					return fmt.Errorf("rank 0 waiting for rank 1 to leave: %w", ctx.Err())
				}
				if err := submitWindow(ctx, d, hs[0]); err != nil {
					return err
				}
				if !tc.hearWhenWaiting {
					close(gate)
				}
				wctx, wcancel := context.WithTimeout(ctx, testTimeout/2)
				defer wcancel()
				waitErr = d.WaitAll(wctx)
				deadline = wctx.Err()
				return nil
			})
			require.NoError(t, err)
			require.ErrorIs(t, leftErr, context.Canceled, "rank 1 left WaitAll")
			checkLeftBehind(t, waitErr, deadline)
			assert.Equal(t, tc.comparisons, started, "comparisons rank 0 started")
		})
	}
}

// A rank that leaves WaitAll after its comparison of the ranks' graphs
// started, and lingers, while the windows compared differ: the other
// rank's exchange of the window's submissions, which the leaving rank
// never joins, ends at once with ErrRankFailed naming it, not a
// difference of the ranks' graphs, instead of waiting for the stall
// timeout (or, without one, for as long as the leaving rank lived).
func TestLeaverMissesExchange(t *testing.T) {
	submitted, left, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var leftErr, waitErr, deadline error
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
		if err != nil {
			return err
		}
		defer ls.Close()
		d, err := dist.New(ctx, c, ls, dist.WithStallTimeout(longStall))
		if err != nil {
			return err
		}
		defer d.Close()
		hs, err := onePerRank[int64](d, 4)
		if err != nil {
			return err
		}
		if d.Rank() == 1 {
			// It leaves with nothing submitted, its comparison started
			// but not answered: rank 0 has not reached WaitAll.
			select {
			case <-submitted:
			case <-ctx.Done():
				return fmt.Errorf("rank 1 waiting for rank 0 to submit: %w", ctx.Err())
			}
			lctx, lcancel := context.WithCancel(ctx)
			lcancel()
			leftErr = d.WaitAll(lctx)
			close(left)
			select { // it lingers until rank 0's WaitAll returned
			case <-done:
				return nil
			case <-ctx.Done():
				return fmt.Errorf("rank 1 waiting for rank 0: %w", ctx.Err())
			}
		}
		defer close(done)
		if err := d.Submit(ctx, windowTask, dist.RW(hs[0])); err != nil {
			return err
		}
		close(submitted)
		select {
		case <-left:
		case <-ctx.Done():
			return fmt.Errorf("rank 0 waiting for rank 1 to leave: %w", ctx.Err())
		}
		// Its comparison meets rank 1's; the windows differ, and the
		// exchange that would name the difference never gets rank 1.
		wctx, wcancel := context.WithTimeout(ctx, testTimeout/2)
		defer wcancel()
		waitErr = d.WaitAll(wctx)
		deadline = wctx.Err()
		return nil
	})
	require.NoError(t, err)
	require.ErrorIs(t, leftErr, context.Canceled, "rank 1 left WaitAll")
	checkLeftBehind(t, waitErr, deadline)
}
