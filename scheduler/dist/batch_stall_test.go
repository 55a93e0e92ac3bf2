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

// TestBatchComparisonStallLeavesTheGraph: on 2 in-process ranks rank 0
// makes two windows of submissions (dist.CheckWindow each) while rank 1
// makes none: the comparison of the first window, waited for when the
// second ends, stalls (a 200 ms stall timeout) in the last of them, a
// Submit, an Unregister, a Flush or a Scatter (which records itself as a
// submission before its own comparison). Its failure was recorded, but rank 0
// did not leave the graph: its WaitAll started another comparison and
// waited a second stall timeout ("the comparison of the ranks' graphs
// did not complete"), and rank 1 heard that rank 0 left WaitAll, where
// it had not. Now rank 0 leaves the graph in the call that stalled, as
// a stalled Scatter or Gather does: its WaitAll returns that at once,
// rank 1's names the call rank 0 left, and both Closes return nil (the
// failure was told).
func TestBatchComparisonStallLeavesTheGraph(t *testing.T) {
	noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
	calls := map[string]func(ctx context.Context, d *dist.Scheduler, h *dist.Handle) error{
		"Submit": func(ctx context.Context, d *dist.Scheduler, h *dist.Handle) error {
			return d.Submit(ctx, noop, dist.RW(h))
		},
		"Unregister": func(ctx context.Context, d *dist.Scheduler, h *dist.Handle) error {
			_, err := d.Unregister(ctx, h)
			return err
		},
		"Flush": func(ctx context.Context, d *dist.Scheduler, h *dist.Handle) error {
			return d.Flush(ctx, h)
		},
		// Its own comparison (compareFirst) first records it as a
		// submission, the window's last.
		"Scatter": func(ctx context.Context, d *dist.Scheduler, h *dist.Handle) error {
			return d.Scatter(ctx, 0, []*dist.Handle{h}, func(int, any) error { return nil })
		},
	}
	const cause = "the comparison of the ranks' graphs did not complete in 200ms"
	for name, last := range calls {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			var callErr, waitErr, closeErr [2]error
			zeroDone := make(chan struct{})
			err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
				ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
				if err != nil {
					return err
				}
				defer ls.Close()
				d, err := dist.New(ctx, c, ls, dist.WithStallTimeout(200*time.Millisecond), dist.WithStallReport(0, nil))
				if err != nil {
					return err
				}
				defer d.Close()
				tiles, err := dist.RegisterTiles[float64](d, 1, 2, 2, 2, dist.BlockCyclic2D(1, 2), nil)
				if err != nil {
					return err
				}
				r := d.Rank()
				if r == 0 {
					for i := range 2*dist.CheckWindow - 1 {
						if err := d.Submit(ctx, noop, dist.RW(tiles[0][0])); err != nil {
							return fmt.Errorf("submission %d: %w", i, err)
						}
					}
					callErr[0] = last(ctx, d, tiles[0][1])
					waitErr[0] = d.WaitAll(ctx)
					closeErr[0] = d.Close()
					close(zeroDone)
					return nil
				}
				// Rank 1 submits nothing until rank 0 is done, then
				// hears that it left (a message).
				for _, ch := range []<-chan struct{}{zeroDone, dist.GraphFailed(d)} {
					select {
					case <-ch:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				waitErr[1] = d.WaitAll(ctx)
				closeErr[1] = d.Close()
				return nil
			})
			require.NoError(t, err)
			t.Logf("rank 0: %s: %v\nWaitAll: %v\nClose: %v", name, callErr[0], waitErr[0], closeErr[0])
			t.Logf("rank 1: WaitAll: %v\nClose: %v", waitErr[1], closeErr[1])
			assert.ErrorIs(t, callErr[0], dist.ErrStalled, "rank 0's %s", name)
			assert.ErrorContains(t, callErr[0], cause, "rank 0's %s", name)
			// Without comparing again (a second stall timeout).
			assert.ErrorContains(t, waitErr[0], "the graph failed when this rank (rank 0) left "+name, "rank 0's WaitAll")
			assert.ErrorContains(t, waitErr[0], cause, "rank 0's WaitAll")
			assert.NotContains(t, waitErr[0].Error(), "WaitAll on rank 0: dist: comparing", "rank 0's WaitAll compared again")
			assert.ErrorIs(t, waitErr[1], dist.ErrRankFailed, "rank 1's WaitAll")
			assert.ErrorContains(t, waitErr[1], "rank 0 left "+name, "rank 1's WaitAll")
			assert.ErrorContains(t, waitErr[1], cause, "rank 1's WaitAll")
			for r := range 2 {
				assert.NoError(t, closeErr[r], "rank %d's Close: the failure was told", r)
			}
		})
	}
}

// TestBatchComparisonEndedContextLeavesTheGraph: as
// TestBatchComparisonStallLeavesTheGraph, but rank 0's context ends
// while its last call (Submit, Unregister, Flush or Scatter) waits in
// the comparison of the first window (rank 1 has not come), before any
// stall timeout. The failure was recorded, but rank 0 stayed in the
// graph: its WaitAll with a fresh context compared again and waited
// the stall timeout. Now rank 0 leaves the graph there, as compareFirst
// and the collectives' exchange do when the context ends (eebc55b):
// its WaitAll returns the departure at once, rank 1's names the call
// rank 0 left, and both Closes return nil.
func TestBatchComparisonEndedContextLeavesTheGraph(t *testing.T) {
	noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
	calls := map[string]func(ctx context.Context, d *dist.Scheduler, h *dist.Handle) error{
		"Submit": func(ctx context.Context, d *dist.Scheduler, h *dist.Handle) error {
			return d.Submit(ctx, noop, dist.RW(h))
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
	for name, last := range calls {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			var callErr, waitErr, closeErr [2]error
			zeroDone := make(chan struct{})
			err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
				ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
				if err != nil {
					return err
				}
				defer ls.Close()
				// A stall timeout far beyond the test's wait: rank 0's
				// WaitAll that compared again waited this long.
				d, err := dist.New(ctx, c, ls, dist.WithStallTimeout(5*time.Second), dist.WithStallReport(0, nil))
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
						if err := d.Submit(ctx, noop, dist.RW(tiles[0][0])); err != nil {
							return fmt.Errorf("submission %d: %w", i, err)
						}
					}
					lctx, lcancel := context.WithCancel(ctx)
					defer lcancel()
					go func() {
						// The last call has recorded its submission: it
						// waits in the comparison, past its own check of
						// ctx.
						for dist.Submitted(d) < 2*dist.CheckWindow && lctx.Err() == nil {
							runtime.Gosched()
						}
						lcancel()
					}()
					callErr[0] = last(lctx, d, tiles[0][1])
					start := time.Now()
					waitErr[0] = d.WaitAll(ctx)
					t.Logf("rank 0's WaitAll took %v", time.Since(start))
					closeErr[0] = d.Close()
					close(zeroDone)
					return nil
				}
				for _, ch := range []<-chan struct{}{zeroDone, dist.GraphFailed(d)} {
					select {
					case <-ch:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				waitErr[1] = d.WaitAll(ctx)
				closeErr[1] = d.Close()
				return nil
			})
			require.NoError(t, err)
			t.Logf("rank 0: %s: %v\nWaitAll: %v\nClose: %v", name, callErr[0], waitErr[0], closeErr[0])
			t.Logf("rank 1: WaitAll: %v\nClose: %v", waitErr[1], closeErr[1])
			assert.ErrorIs(t, callErr[0], context.Canceled, "rank 0's %s", name)
			assert.NotErrorIs(t, callErr[0], dist.ErrStalled, "rank 0's %s", name)
			assert.ErrorContains(t, waitErr[0], "the graph failed when this rank (rank 0) left "+name, "rank 0's WaitAll")
			assert.NotErrorIs(t, waitErr[0], dist.ErrStalled, "rank 0's WaitAll compared again")
			assert.ErrorIs(t, waitErr[1], dist.ErrRankFailed, "rank 1's WaitAll")
			assert.ErrorContains(t, waitErr[1], "rank 0 left "+name, "rank 1's WaitAll")
			for r := range 2 {
				assert.NoError(t, closeErr[r], "rank %d's Close: the failure was told", r)
			}
		})
	}
}
