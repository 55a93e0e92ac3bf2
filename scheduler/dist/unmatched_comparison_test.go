package dist_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// comparisonsComm records the Iallreduces (the graph check's
// comparisons) started on it and its duplicates.
type comparisonsComm struct {
	comm.Comm
	mu      *sync.Mutex
	reqs    *[]comm.Request
	started chan struct{} // gets a value (if room) as each starts
}

func (s *comparisonsComm) Dup(ctx context.Context) (comm.Comm, error) {
	d, err := s.Comm.Dup(ctx)
	if err != nil {
		return nil, err
	}
	return &comparisonsComm{Comm: d, mu: s.mu, reqs: s.reqs, started: s.started}, nil
}

func (s *comparisonsComm) Iallreduce(send, recv comm.Buf, op comm.Op) (comm.Request, error) {
	r, err := s.Comm.Iallreduce(send, recv, op)
	if err == nil {
		s.mu.Lock()
		*s.reqs = append(*s.reqs, r)
		s.mu.Unlock()
		select {
		case s.started <- struct{}{}:
		default:
		}
	}
	return r, err
}

// TestEndedWaitAllMeetsStartedComparison: rank 1's WaitAll (its context
// live) starts the comparison of the ranks' graphs; then rank 0 calls
// WaitAll with a context that has ended. Every comparison a rank starts
// must be one every rank starts (under MPI one that is not stays
// running, for MPI_Finalize to refuse): each completes without error.
func TestEndedWaitAllMeetsStartedComparison(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	var mu sync.Mutex
	reqs := make([][]comm.Request, 2)
	started := make(chan struct{}, 1)
	zeroClosed := make(chan struct{})
	waitErrs, closeErrs := make([]error, 2), make([]error, 2)
	err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		r := c.Rank()
		ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
		if err != nil {
			return err
		}
		defer ls.Close()
		spy := &comparisonsComm{Comm: c, mu: &mu, reqs: &reqs[r]}
		if r == 1 {
			spy.started = started
		}
		d, err := dist.New(ctx, spy, ls)
		if err != nil {
			return err
		}
		hs, err := onePerRank[float64](d, 1)
		if err != nil {
			return err
		}
		if err := d.Submit(ctx, noopBatch, dist.RW(hs[0])); err != nil {
			return err
		}
		if r == 1 {
			waitErrs[1] = d.WaitAll(ctx)
			// In process, closing frees rank 1's comparison, which
			// would end rank 0's with an error: rank 1 closes last.
			select {
			case <-zeroClosed:
			case <-ctx.Done():
				return ctx.Err()
			}
		} else {
			select { // rank 1 started its comparison
			case <-started:
			case <-ctx.Done():
				return ctx.Err()
			}
			ended, cancel := context.WithCancel(ctx)
			cancel()
			waitErrs[0] = d.WaitAll(ended)
			defer close(zeroClosed)
		}
		closeErrs[r] = d.Close()
		return nil
	})
	require.NoError(t, err)
	for r := range 2 {
		t.Logf("rank %d: WaitAll: %v\nClose: %v", r, waitErrs[r], closeErrs[r])
	}
	assert.ErrorIs(t, waitErrs[0], context.Canceled)
	assert.ErrorIs(t, waitErrs[1], dist.ErrRankFailed)
	assert.Equal(t, len(reqs[0]), len(reqs[1]), "comparisons started by rank 0 and rank 1")
	for r := range 2 {
		for i, q := range reqs[r] {
			done, _, err := q.Test()
			assert.True(t, done && err == nil, "rank %d's comparison %d: done %v, %v", r, i, done, err)
		}
	}
}

// TestGivenUpComparisonJoinedAtClose: rank 0 makes two windows of
// submissions, the last call of the second being a Submit, Unregister,
// Flush or Scatter, while rank 1 makes none: rank 0's comparison of the
// first window stalls (200 ms) and rank 0 leaves the graph there,
// giving that comparison up. Rank 1, once it heard that the graph
// failed, closes without WaitAll. The comparison rank 0 started must be
// one rank 1 starts too (under MPI rank 0's stays running, for
// MPI_Finalize to refuse): Close on rank 1 joins it, and each completes
// without error.
func TestGivenUpComparisonJoinedAtClose(t *testing.T) {
	for name, last := range batchLastCalls {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			var mu sync.Mutex
			reqs := make([][]comm.Request, 2)
			oneClosed := make(chan struct{})
			callErr, closeErrs := error(nil), make([]error, 2)
			err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
				r := c.Rank()
				ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
				if err != nil {
					return err
				}
				defer ls.Close()
				spy := &comparisonsComm{Comm: c, mu: &mu, reqs: &reqs[r]}
				d, err := dist.New(ctx, spy, ls, dist.WithStallTimeout(200*time.Millisecond), dist.WithStallReport(0, nil))
				if err != nil {
					return err
				}
				tiles, err := dist.RegisterTiles[float64](d, 1, 2, 2, 2, dist.BlockCyclic2D(1, 2), nil)
				if err != nil {
					return err
				}
				if r == 1 {
					select {
					case <-dist.GraphFailed(d):
					case <-ctx.Done():
						return ctx.Err()
					}
					closeErrs[1] = d.Close()
					close(oneClosed)
					return nil
				}
				for i := range 2*dist.CheckWindow - 1 {
					if err := d.Submit(ctx, noopBatch, dist.RW(tiles[0][0])); err != nil {
						return fmt.Errorf("submission %d: %w", i, err)
					}
				}
				callErr = last(ctx, d, tiles[0][1])
				_ = d.WaitAll(ctx)
				// In process, closing frees rank 0's comparison, which
				// would end rank 1's with an error: rank 0 closes last.
				select {
				case <-oneClosed:
				case <-ctx.Done():
					return ctx.Err()
				}
				closeErrs[0] = d.Close()
				return nil
			})
			require.NoError(t, err)
			t.Logf("rank 0: %s: %v\nClose: %v\nrank 1: Close: %v", name, callErr, closeErrs[0], closeErrs[1])
			assert.ErrorIs(t, callErr, dist.ErrStalled, "rank 0's %s", name)
			assert.NoError(t, closeErrs[1], "rank 1's Close")
			assert.Equal(t, len(reqs[0]), len(reqs[1]), "comparisons started by rank 0 and rank 1")
			for r := range 2 {
				for i, q := range reqs[r] {
					done, _, err := q.Test()
					assert.True(t, done && err == nil, "rank %d's comparison %d: done %v, %v", r, i, done, err)
				}
			}
		})
	}
}
