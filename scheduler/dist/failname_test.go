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

// A tiled program submits many tasks of one codelet; when one fails,
// every rank's WaitAll names the task, not only its codelet: its
// submission's number and its tiles, as the graph check names a
// submission. Found porting a tiled LU to dist (helper trial): a gemm
// made to fail on rank 2 gave 'rank 2: scheduler: task of codelet
// "gemm" failed on worker 0: injected failure' on every rank, one of 55
// gemm tasks.
func TestFailedTaskNamesItsTiles(t *testing.T) {
	boom := errors.New("injected failure")
	const nt = 3
	var submitted sync.WaitGroup
	submitted.Add(3)
	gemm := &scheduler.Codelet{Name: "gemm", CPU: func(c *scheduler.Call) error {
		if c.Arg == "fail" {
			submitted.Wait()
			return boom
		}
		return nil
	}}
	errs := make([]error, 3)
	err := runRanks(t, 3, func(ctx context.Context, d *dist.Scheduler) error {
		done := sync.OnceFunc(submitted.Done)
		defer done()
		A, err := dist.RegisterTiles[float64](d, nt, nt, 2, 2, dist.Cyclic1D(nt, 3), nil, scheduler.Named("A"))
		if err != nil {
			return err
		}
		for i := range nt {
			for j := range nt {
				for k := range nt {
					args := []dist.Arg{dist.R(A[i][k]), dist.R(A[k][j]), dist.RW(A[i][j])}
					if i == 2 && j == 1 && k == 0 { // tile (2,1): rank 1 of Cyclic1D(3, 3)
						args = append(args, dist.With(scheduler.WithArg("fail")))
					}
					if err := d.Submit(ctx, gemm, args...); err != nil {
						return err
					}
				}
			}
		}
		done()
		errs[d.Rank()] = d.WaitAll(ctx)
		return nil
	})
	require.NoError(t, err)
	// Submission #21 (i=2, j=1, k=0; the 9 tiles are #0-#8 and registering
	// is not a submission).
	for r, e := range errs {
		require.ErrorIs(t, e, dist.ErrRankFailed, "rank %d", r)
		msg := e.Error()
		assert.Contains(t, msg, `rank 1: task "gemm" of submission #21: R("A(2,0)") R("A(0,1)") RW("A(2,1)"): `, "rank %d", r)
		assert.Contains(t, msg, "injected failure", "rank %d", r)
		assert.NotContains(t, msg, "rank 1: rank 1:", "rank %d", r)
	}
}
