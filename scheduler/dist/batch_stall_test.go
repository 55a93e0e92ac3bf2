package dist_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

var noopBatch = &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}

// batchLastCall is a call that ends a window of submissions on rank 0.
type batchLastCall func(ctx context.Context, d *dist.Scheduler, h *dist.Handle) error

// batchLastCalls are the calls that can end a window: a Submit, an
// Unregister, a Flush, or a Scatter, whose own comparison (compareFirst)
// first records it as a submission, the window's last.
var batchLastCalls = map[string]batchLastCall{
	"Submit": func(ctx context.Context, d *dist.Scheduler, h *dist.Handle) error {
		return d.Submit(ctx, noopBatch, dist.RW(h))
	},
	"Unregister": func(ctx context.Context, d *dist.Scheduler, h *dist.Handle) error {
		_, err := d.Unregister(ctx, h)
		return err
	},
	"Flush": func(ctx context.Context, d *dist.Scheduler, h *dist.Handle) error {
		return d.Flush(ctx, h)
	},
	"Scatter": func(ctx context.Context, d *dist.Scheduler, h *dist.Handle) error {
		return d.Scatter(ctx, 0, []*dist.Handle{h}, func(int, any) error { return nil })
	},
}

// batchLeave is what each of the two ranks of runBatchLeave got.
type batchLeave struct {
	call, wait, close [2]error // rank 1 makes no last call
}

// runBatchLeave runs 2 in-process ranks with a stall timeout of stall:
// rank 0 makes two windows of submissions (dist.CheckWindow each), the
// last call of the second being last, while rank 1 makes none; then
// rank 0 waits and closes, and rank 1, once rank 0 is done and it heard
// that the graph failed, waits and closes.
func runBatchLeave(t *testing.T, stall time.Duration, last batchLastCall) batchLeave {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	var got batchLeave
	zeroDone := make(chan struct{})
	err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
		if err != nil {
			return err
		}
		defer ls.Close()
		d, err := dist.New(ctx, c, ls, dist.WithStallTimeout(stall), dist.WithStallReport(0, nil))
		if err != nil {
			return err
		}
		defer d.Close()
		tiles, err := dist.RegisterTiles[float64](d, 1, 2, 2, 2, dist.BlockCyclic2D(1, 2), nil)
		if err != nil {
			return err
		}
		if d.Rank() == 0 {
			for i := range 2*dist.CheckWindow - 1 {
				if err := d.Submit(ctx, noopBatch, dist.RW(tiles[0][0])); err != nil {
					return fmt.Errorf("submission %d: %w", i, err)
				}
			}
			got.call[0] = last(ctx, d, tiles[0][1])
			start := time.Now()
			got.wait[0] = d.WaitAll(ctx)
			t.Logf("rank 0's WaitAll took %v", time.Since(start))
			got.close[0] = d.Close()
			close(zeroDone)
			return nil
		}
		// Rank 1 submits nothing until rank 0 is done, then hears that
		// it left (a message).
		for _, ch := range []<-chan struct{}{zeroDone, dist.GraphFailed(d)} {
			select {
			case <-ch:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		got.wait[1] = d.WaitAll(ctx)
		got.close[1] = d.Close()
		return nil
	})
	require.NoError(t, err)
	t.Logf("rank 0: last call: %v\nWaitAll: %v\nClose: %v", got.call[0], got.wait[0], got.close[0])
	t.Logf("rank 1: WaitAll: %v\nClose: %v", got.wait[1], got.close[1])
	return got
}

// TestBatchComparisonStallLeavesTheGraph: rank 0's comparison of the
// first window, waited for when the second ends, stalls (a 200 ms stall
// timeout) in the last call of that window (runBatchLeave). Its failure
// was recorded, but rank 0 did not leave the graph: its WaitAll started
// another comparison and waited a second stall timeout ("the comparison
// of the ranks' graphs did not complete"), and rank 1 heard that rank 0
// left WaitAll, where it had not. Now rank 0 leaves the graph in the
// call that stalled, as a stalled Scatter or Gather does: its WaitAll
// returns that at once, rank 1's names the call rank 0 left, and both
// Closes return nil (the failure was told).
func TestBatchComparisonStallLeavesTheGraph(t *testing.T) {
	const cause = "the comparison of the ranks' graphs did not complete in 200ms"
	for name, last := range batchLastCalls {
		t.Run(name, func(t *testing.T) {
			got := runBatchLeave(t, 200*time.Millisecond, last)
			assert.ErrorIs(t, got.call[0], dist.ErrStalled, "rank 0's %s", name)
			assert.ErrorContains(t, got.call[0], cause, "rank 0's %s", name)
			// Without comparing again (a second stall timeout).
			assert.ErrorContains(t, got.wait[0], "the graph failed when this rank (rank 0) left "+name, "rank 0's WaitAll")
			assert.ErrorContains(t, got.wait[0], cause, "rank 0's WaitAll")
			assert.NotContains(t, got.wait[0].Error(), "WaitAll on rank 0: dist: comparing", "rank 0's WaitAll compared again")
			assert.ErrorIs(t, got.wait[1], dist.ErrRankFailed, "rank 1's WaitAll")
			assert.ErrorContains(t, got.wait[1], "rank 0 left "+name, "rank 1's WaitAll")
			assert.ErrorContains(t, got.wait[1], cause, "rank 1's WaitAll")
			for r := range 2 {
				assert.NoError(t, got.close[r], "rank %d's Close: the failure was told", r)
			}
		})
	}
}

// TestBatchComparisonEndedContextLeavesTheGraph: as
// TestBatchComparisonStallLeavesTheGraph, but rank 0's context ends
// while its last call waits in the comparison of the first window
// (rank 1 has not come), before any stall timeout. The failure was
// recorded, but rank 0 stayed in the graph: its WaitAll with a fresh
// context compared again and waited the stall timeout. Now rank 0
// leaves the graph there, as compareFirst and the collectives' exchange
// do when the context ends (eebc55b): its WaitAll returns the departure
// at once, rank 1's names the call rank 0 left, and both Closes return
// nil.
func TestBatchComparisonEndedContextLeavesTheGraph(t *testing.T) {
	for name, last := range batchLastCalls {
		t.Run(name, func(t *testing.T) {
			canceled := func(ctx context.Context, d *dist.Scheduler, h *dist.Handle) error {
				lctx, lcancel := context.WithCancel(ctx)
				defer lcancel()
				go func() {
					// The last call has recorded its submission: it waits
					// in the comparison, past its own check of ctx.
					for dist.Submitted(d) < 2*dist.CheckWindow && lctx.Err() == nil {
						runtime.Gosched()
					}
					lcancel()
				}()
				return last(lctx, d, h)
			}
			// A stall timeout far beyond the test's wait: rank 0's
			// WaitAll that compared again waited this long.
			got := runBatchLeave(t, 5*time.Second, canceled)
			assert.ErrorIs(t, got.call[0], context.Canceled, "rank 0's %s", name)
			assert.NotErrorIs(t, got.call[0], dist.ErrStalled, "rank 0's %s", name)
			assert.ErrorContains(t, got.wait[0], "the graph failed when this rank (rank 0) left "+name, "rank 0's WaitAll")
			assert.NotErrorIs(t, got.wait[0], dist.ErrStalled, "rank 0's WaitAll compared again")
			assert.ErrorIs(t, got.wait[1], dist.ErrRankFailed, "rank 1's WaitAll")
			assert.ErrorContains(t, got.wait[1], "rank 0 left "+name, "rank 1's WaitAll")
			for r := range 2 {
				assert.NoError(t, got.close[r], "rank %d's Close: the failure was told", r)
			}
		})
	}
}
