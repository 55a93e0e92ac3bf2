package dist_test

import (
	"context"
	"errors"
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

// TestEndedWaitAllAfterFailure is TestMPIEndedWaitAllAfterFailure on 2
// in-process ranks: a task fails on rank 0; once both ranks know the
// graph failed, each calls WaitAll with a context that has already
// ended. Each returns its context's end at once without comparing the
// graphs, Close reports only the failure no call reported, and the
// ranks leave no goroutine behind (a comparison left running in
// comm/local would hold one).
func TestEndedWaitAllAfterFailure(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	waitErrs := make([]error, 2)
	closeErrs := make([]error, 2)
	err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
		if err != nil {
			return err
		}
		defer ls.Close()
		d, err := dist.New(ctx, c, ls)
		if err != nil {
			return err
		}
		hs, err := onePerRank[float64](d, 1)
		if err != nil {
			return errors.Join(err, d.Close())
		}
		boom := &scheduler.Codelet{Name: "boom", CPU: func(*scheduler.Call) error { return errors.New("boom") }}
		// Rank 1's Submit may hear of the failure already: it reports it.
		if err := d.Submit(ctx, boom, dist.RW(hs[0])); err != nil && !errors.Is(err, dist.ErrRankFailed) {
			return errors.Join(err, d.Close())
		}
		select {
		case <-dist.GraphFailed(d):
		case <-ctx.Done():
			return errors.Join(ctx.Err(), d.Close())
		}
		ended, cancel := context.WithCancel(ctx)
		cancel()
		waitErrs[c.Rank()] = d.WaitAll(ended)
		closeErrs[c.Rank()] = d.Close()
		return nil
	})
	require.NoError(t, err)
	for r := range 2 {
		t.Logf("rank %d: WaitAll: %v\nClose: %v", r, waitErrs[r], closeErrs[r])
		assert.ErrorIs(t, waitErrs[r], context.Canceled, "rank %d", r)
		assert.NotContains(t, waitErrs[r].Error(), "comparing", "rank %d compared the graphs", r)
		if closeErrs[r] != nil {
			// No call reported the failure (an ended context leaves it
			// untold): Close does, and nothing else.
			assert.ErrorContains(t, closeErrs[r], "the graph failed, and no call of the program's reported it", "rank %d", r)
		}
	}
	assert.ErrorContains(t, closeErrs[0], "boom", "rank 0's Close")
	require.NoError(t, ctx.Err())
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, "goroutines left behind")
}
