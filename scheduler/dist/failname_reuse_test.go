package dist_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// TestFailedTaskNamedAfterWindowsAndSliceReuse: a task that fails long
// after it was submitted - its comparison window's arrays reused by later
// windows, hundreds of pooled completion callbacks taken and put back
// since, and the program's argument slice overwritten by every later
// submission - is still named by its own submission and handle on every
// rank (583c310: windows' access arrays reused two windows later, one
// local args array, pooled callbacks holding a copy of the arguments).
func TestFailedTaskNamedAfterWindowsAndSliceReuse(t *testing.T) {
	boom := errors.New("injected failure")
	const n, fail = 300, 250 // about 5 windows of 64; #250 writes V(2,0), on rank 0
	var submitted sync.WaitGroup
	submitted.Add(2)
	step := &scheduler.Codelet{Name: "step", CPU: func(c *scheduler.Call) error {
		if c.Arg == fail {
			submitted.Wait()
			return boom
		}
		return nil
	}}
	errs := make([]error, 2)
	err := runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
		done := sync.OnceFunc(submitted.Done)
		defer done()
		V, err := dist.RegisterTiles[float64](d, 8, 1, 1, 1, dist.Cyclic1D(1, 2), nil, scheduler.Named("V"))
		if err != nil {
			return err
		}
		args := make([]dist.Arg, 2) // reused by every submission
		for s := range n {
			args[0] = dist.RW(V[s%8][0])
			args[1] = dist.With(scheduler.WithArg(s))
			if err := d.Submit(ctx, step, args...); err != nil {
				return err
			}
		}
		done()
		errs[d.Rank()] = d.WaitAll(ctx)
		return nil
	})
	require.NoError(t, err)
	for r, e := range errs {
		require.ErrorIs(t, e, dist.ErrRankFailed, "rank %d", r)
		msg := e.Error()
		assert.Contains(t, msg, `rank 0: task "step" of submission #250: RW("V(2,0)"): `, "rank %d", r)
		assert.Contains(t, msg, "injected failure", "rank %d", r)
	}
}
