package dist_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// An iterative solver whose ranks decide apart whether to take another
// step (each from a residual of its own, the AllReduce forgotten): rank 0
// stops and gathers the result while rank 1 goes on submitting steps, or
// waits for them. Rank 0 waited in the exchange of Gather's arguments and
// rank 1 in the comparison of the graphs, each for a collective the
// other never made, until the stall timeout: 10 minutes under
// runtimeview, for ever without one (here the test's deadline ended it,
// 60 s). Now the call is compared as a submission first, and both ranks
// get ErrGraphMismatch naming it and what the other rank did instead,
// at once.
func TestCollectiveWhileOthersSubmit(t *testing.T) {
	calls := rootedCalls()
	step := &scheduler.Codelet{Name: "step", CPU: func(c *scheduler.Call) error {
		scheduler.VectorOf[float64](c, 0)[0]++
		return nil
	}}
	for name, call := range calls {
		for _, other := range []string{"submits", "waits"} {
			t.Run(name+"/other "+other, func(t *testing.T) {
				errs := make([]error, 2)
				ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
				defer cancel()
				start := time.Now()
				err := runTiledPair(ctx, func(ctx context.Context, d *dist.Scheduler, tiles [][]*dist.Handle) error {
					steps := 10 // both ranks: the same graph so far
					if d.Rank() == 1 && other == "submits" {
						steps += 3 * 64 // then rank 1 goes on, past windows of the graph check
					}
					for s := range steps {
						if err := d.Submit(ctx, step, dist.RW(tiles[0][s%2])); err != nil {
							errs[d.Rank()] = err
							return nil
						}
					}
					if d.Rank() == 0 {
						errs[0] = call(ctx, d, tiles)
					} else {
						errs[1] = d.WaitAll(ctx)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				for r, err := range errs {
					assert.ErrorIs(t, err, dist.ErrGraphMismatch, "rank %d", r)
					assert.ErrorContains(t, err, fmt.Sprintf(`rank 0 made submission #10: codelet "dist.%s"`, name), "rank %d", r)
				}
				if other == "submits" {
					assert.ErrorContains(t, errs[1], `rank 1 made submission #10: codelet "step"`)
				} else {
					assert.ErrorContains(t, errs[1], `rank 1 is in WaitAll after 10 submissions`)
				}
				assert.Less(t, time.Since(start), testTimeout/2, "the ranks waited for each other")
			})
		}
	}
}

// collectiveCall is one of the collective calls rooted at rank 0 that the
// graph check compares as submissions, on runTiledPair's tiles.
type collectiveCall func(ctx context.Context, d *dist.Scheduler, tiles [][]*dist.Handle) error

// rootedCalls returns Gather, Scatter, GatherMatrix and ScatterMatrix
// rooted at rank 0, by name.
func rootedCalls() map[string]collectiveCall {
	return map[string]collectiveCall{
		"Gather": func(ctx context.Context, d *dist.Scheduler, tiles [][]*dist.Handle) error {
			return d.Gather(ctx, 0, tiles[0], func(int, any) error { return nil })
		},
		"Scatter": func(ctx context.Context, d *dist.Scheduler, tiles [][]*dist.Handle) error {
			return d.Scatter(ctx, 0, tiles[0], func(int, any) error { return nil })
		},
		"GatherMatrix": func(ctx context.Context, d *dist.Scheduler, tiles [][]*dist.Handle) error {
			return dist.GatherMatrix(ctx, d, 0, make([]float64, 8), 2, 4, tiles)
		},
		"ScatterMatrix": func(ctx context.Context, d *dist.Scheduler, tiles [][]*dist.Handle) error {
			return dist.ScatterMatrix(ctx, d, 0, make([]float64, 8), 2, 4, tiles)
		},
	}
}

// runTiledPair runs fn on 2 in-process ranks, each with a scheduler of
// one worker under dist.New (no stall timeout: only ctx ends a wait) and
// a 1 x 2 grid of 2 x 2 float64 tiles, one per rank.
func runTiledPair(ctx context.Context, fn func(ctx context.Context, d *dist.Scheduler, tiles [][]*dist.Handle) error) error {
	return local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
		if err != nil {
			return err
		}
		defer ls.Close()
		d, err := dist.New(ctx, c, ls)
		if err != nil {
			return err
		}
		defer d.Close()
		tiles, err := dist.RegisterTiles[float64](d, 1, 2, 2, 2, dist.BlockCyclic2D(1, 2), nil)
		if err != nil {
			return err
		}
		return fn(ctx, d, tiles)
	})
}
