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

// afterCollective is what one rank's program got from a rooted
// collective that failed and from the calls it made afterwards.
type afterCollective struct {
	call, submit, wait, close error
	took                      [4]time.Duration
}

// record runs f, keeps its error in *err and how long it took in *took.
func record(err *error, took *time.Duration, f func() error) {
	start := time.Now()
	*err = f()
	*took = time.Since(start)
}

// TestCollectiveFailureIsTheGraphs: Scatter, Gather, ScatterMatrix and
// GatherMatrix on 2 in-process ranks fail after the comparison of the
// graphs, in the exchange of their arguments - rank 0's context ends
// there ("canceled"; no stall timeout), or rank 1 comes to it only once
// rank 0 gave up waiting ("late"; a 200 ms stall timeout) - or rank 1
// never makes the call ("absent": rank 0 stalls in the comparison; rank
// 1 then calls WaitAll). Then each rank submits a task, calls WaitAll
// and closes. The exchange's failure was not the graph's: rank 0's
// Submit succeeded, its WaitAll compared the graphs again (over a
// communicator its abandoned exchange had broken, or, absent, until a
// second stall timeout, "the comparison of the ranks' graphs did not
// complete"), and rank 1's calls told of a broken communicator, not of
// why. Now the failure is recorded as the graph's and the rank that
// failed leaves the graph (the others hear it, as of a rank that left
// WaitAll): every later call returns at once, naming the same cause on
// both ranks, and Close, the failure already told, returns nil.
func TestCollectiveFailureIsTheGraphs(t *testing.T) {
	noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
	for _, kind := range []string{"canceled", "late", "absent"} {
		for name, call := range rootedCalls() {
			t.Run(kind+"/"+name, func(t *testing.T) {
				var got [2]afterCollective
				ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
				defer cancel()
				var opts []dist.Option
				if kind != "canceled" {
					opts = append(opts, dist.WithStallTimeout(200*time.Millisecond), dist.WithStallReport(0, nil))
				}
				var endZero context.CancelFunc
				zeroAtExchange, zeroReturned, zeroDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
				err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
					ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
					if err != nil {
						return err
					}
					defer ls.Close()
					d, err := dist.New(ctx, c, ls, opts...)
					if err != nil {
						return err
					}
					defer d.Close()
					tiles, err := dist.RegisterTiles[float64](d, 1, 2, 2, 2, dist.BlockCyclic2D(1, 2), nil)
					if err != nil {
						return err
					}
					g := &got[d.Rank()]
					callCtx, end := context.WithCancel(ctx)
					defer end()
					switch {
					case d.Rank() == 0:
						dist.BeforeExchange(d, func() { close(zeroAtExchange) })
					case kind == "canceled":
						dist.BeforeExchange(d, func() {
							<-zeroAtExchange
							endZero()
							<-zeroReturned
						})
					case kind == "late":
						dist.BeforeExchange(d, func() { <-zeroReturned })
					}
					if d.Rank() == 0 {
						// Rank 1's hook ends this context ("canceled"),
						// once rank 0 is at the exchange.
						endZero = end
					}
					if d.Rank() == 1 && kind == "absent" {
						// Rank 1 never makes the call; it waits until rank
						// 0 is done with it and what follows.
						select {
						case <-zeroDone:
						case <-ctx.Done():
						}
						// Then it hears that rank 0 left (a message: its
						// Submit, no collective, may come first).
						select {
						case <-dist.GraphFailed(d):
						case <-ctx.Done():
						}
					} else {
						record(&g.call, &g.took[0], func() error { return call(callCtx, d, tiles) })
					}
					if d.Rank() == 0 {
						close(zeroReturned)
					}
					record(&g.submit, &g.took[1], func() error { return d.Submit(ctx, noop, dist.RW(tiles[0][0])) })
					record(&g.wait, &g.took[2], func() error { return d.WaitAll(ctx) })
					record(&g.close, &g.took[3], d.Close)
					if d.Rank() == 0 {
						close(zeroDone)
					}
					return nil
				})
				require.NoError(t, err)
				for r, g := range got {
					t.Logf("rank %d: call %v (%v)\n submit %v (%v)\n wait %v (%v)\n close %v (%v)", r, g.call, g.took[0], g.submit, g.took[1], g.wait, g.took[2], g.close, g.took[3])
				}
				// What every error names: the first failure.
				cause := map[string]string{
					"canceled": fmt.Sprintf(`stopped submitting at "dist.%s": context canceled`, name),
					"late":     fmt.Sprintf("rank 0 waited 200ms for the other ranks to call %s", name),
					"absent":   "the comparison of the ranks' graphs did not complete in 200ms",
				}[kind]
				zero, one := got[0], got[1]
				switch kind {
				case "canceled":
					assert.ErrorIs(t, zero.call, context.Canceled, "rank 0's call")
				default:
					assert.ErrorIs(t, zero.call, dist.ErrStalled, "rank 0's call")
				}
				if kind == "absent" {
					assert.NoError(t, one.call, "rank 1 made no call")
				} else {
					assert.ErrorIs(t, one.call, dist.ErrRankFailed, "rank 1's call")
					assert.ErrorContains(t, one.call, cause, "rank 1's call")
				}
				assert.ErrorContains(t, zero.call, cause, "rank 0's call")
				for r, g := range got {
					assert.ErrorContains(t, g.submit, cause, "rank %d's Submit", r)
					assert.ErrorContains(t, g.wait, cause, "rank %d's WaitAll", r)
					assert.NoError(t, g.close, "rank %d's Close: the failure was told", r)
				}
				assert.ErrorIs(t, one.submit, dist.ErrRankFailed, "rank 1's Submit")
				assert.ErrorIs(t, one.wait, dist.ErrRankFailed, "rank 1's WaitAll")
				// Rank 0's WaitAll returns the failure it left with,
				// without comparing the graphs again (which waited for
				// a second stall timeout, or met the communicator that
				// rank 0's abandoned exchange broke).
				assert.ErrorContains(t, zero.wait, "the graph failed when this rank (rank 0) left "+name, "rank 0's WaitAll")
				if kind != "canceled" {
					// Rank 1 heard that rank 0 left (canceled: it may
					// also meet the broken communicator first).
					assert.ErrorContains(t, one.wait, "rank 0 left "+name, "rank 1's WaitAll")
				}
			})
		}
	}
}
