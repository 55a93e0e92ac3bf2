package dist_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// Once a rank knows that the graph failed - here because one rank left
// WaitAll, its context canceled - the graph's tasks on its local
// scheduler that have not started never do: those queued behind the
// running ones and those waiting for their dependencies are canceled,
// the running ones finish, and WaitAll returns ErrRankFailed once they
// have. Before, every rank, the leaving one too, went on starting the
// graph's ready tasks after the failure, and the others' WaitAll
// returned only once all had run.
//
// Each of 4 ranks runs, on 2 workers, holdTasks tasks on handles of its
// own plus one that waits for the first of them: the first two hold
// their workers until released (no sleep: channels), the others wait.
// Once every rank has two tasks running, rank 2 leaves WaitAll; once
// every rank knows that the graph failed, the running tasks are
// released.
func TestFailedGraphStartsNoTask(t *testing.T) {
	const (
		ranks     = 4
		workers   = 2
		holdTasks = 5 // per rank, on handles of its own; plus one dependent
		leaver    = 2
	)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var starts [ranks]atomic.Int64
	started := make(chan int, ranks*(holdTasks+1))
	release := make(chan struct{})
	hold := &scheduler.Codelet{Name: "hold", CPU: func(c *scheduler.Call) error {
		r := c.Arg.(int)
		starts[r].Add(1)
		started <- r
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	var failed [ranks]<-chan struct{} // each rank's dist.GraphFailed
	var waitErrs [ranks]error
	var waiting sync.WaitGroup // the ranks that stay in WaitAll
	waiting.Add(ranks - 1)
	waited := make(chan struct{})
	go func() { waiting.Wait(); close(waited) }()
	var submitted sync.WaitGroup // every rank has made all its submissions
	submitted.Add(ranks)
	allSubmitted := make(chan struct{})
	go func() { submitted.Wait(); close(allSubmitted) }()

	err := local.Run(ctx, ranks, func(ctx context.Context, c comm.Comm) error {
		ls, err := scheduler.New(ctx, scheduler.WithWorkers(workers))
		if err != nil {
			return err
		}
		defer ls.Close()
		d, err := dist.New(ctx, c, ls, dist.WithStallTimeout(longStall))
		if err != nil {
			return err
		}
		defer d.Close()
		failed[d.Rank()] = dist.GraphFailed(d) // before any task starts
		hs := make([][]*dist.Handle, ranks)
		for r := range hs {
			for range holdTasks {
				var data []int64
				if r == d.Rank() {
					data = make([]int64, 1)
				}
				h, err := dist.Register(d, r, data, 1, 1)
				if err != nil {
					return err
				}
				hs[r] = append(hs[r], h)
			}
		}
		for r := range hs {
			for _, h := range append(hs[r], hs[r][0]) {
				if err := d.Submit(ctx, hold, dist.RW(h), dist.With(scheduler.WithArg(r))); err != nil {
					return err
				}
			}
		}
		submitted.Done()
		if d.Rank() != leaver {
			defer waiting.Done()
			waitErrs[d.Rank()] = d.WaitAll(ctx)
			return nil
		}
		for range ranks * workers {
			select {
			case <-started:
			case <-ctx.Done():
				return fmt.Errorf("waiting for every rank's workers to hold a task: %w", ctx.Err())
			}
		}
		// A rank still submitting would hear of the failure at Submit,
		// not in WaitAll as this test wants.
		select {
		case <-allSubmitted:
		case <-ctx.Done():
			return fmt.Errorf("waiting for every rank's submissions: %w", ctx.Err())
		}
		lctx, lcancel := context.WithCancel(ctx)
		lcancel()
		waitErrs[leaver] = d.WaitAll(lctx)
		for r := range failed {
			select {
			case <-failed[r]:
			case <-ctx.Done():
				return fmt.Errorf("waiting for rank %d to hear of the failure: %w", r, ctx.Err())
			}
		}
		close(release)
		select { // it lingers until the others' WaitAll returned
		case <-waited:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("rank %d waiting for the others' WaitAll: %w", leaver, ctx.Err())
		}
	})
	require.NoError(t, err)
	require.ErrorIs(t, waitErrs[leaver], context.Canceled)
	for r := range ranks {
		if r != leaver {
			require.ErrorIs(t, waitErrs[r], dist.ErrRankFailed, "rank %d", r)
			assert.ErrorContains(t, waitErrs[r], fmt.Sprintf("rank %d left WaitAll", leaver), "rank %d", r)
		}
		assert.Equal(t, int64(workers), starts[r].Load(), "tasks started on rank %d: only those running when the graph failed", r)
	}
}
