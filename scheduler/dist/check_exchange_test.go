package dist_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// endedAtExchange is one rank of the exchange tests: rank 0 submits
// "a", the others "b", so that WaitAll's comparison of the graphs finds
// the windows apart; the context of leaver's WaitAll ends right after
// that comparison, before the exchange of the submissions that names
// the first difference. It returns the rank's WaitAll and Close errors.
func endedAtExchange(ctx context.Context, c comm.Comm, leaver int) (waitErr, closeErr error, err error) {
	ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
	if err != nil {
		return nil, nil, err
	}
	defer ls.Close()
	d, err := dist.New(ctx, c, ls)
	if err != nil {
		return nil, nil, err
	}
	hs, err := onePerRank[float64](d, 1)
	if err != nil {
		d.Close()
		return nil, nil, err
	}
	name := "b"
	if d.Rank() == 0 {
		name = "a"
	}
	cl := &scheduler.Codelet{Name: name, CPU: func(*scheduler.Call) error { return nil }}
	if err := d.Submit(ctx, cl, dist.RW(hs[0])); err != nil {
		d.Close()
		return nil, nil, err
	}
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if d.Rank() == leaver {
		dist.BeforeCheckExchange(d, cancel)
	}
	waitErr = d.WaitAll(callCtx)
	return waitErr, d.Close(), nil
}

// checkEndedAtExchange checks one rank's outcome of endedAtExchange:
// the exchange went ahead (the ranks had all completed the comparison,
// so every rank makes it), so every rank names the first difference
// (leaver, unless the exchange completed before it saw its context
// end, names its context's end instead), and Close has nothing left to
// report.
func checkEndedAtExchange(t *testing.T, rank, leaver int, waitErr, closeErr error) {
	t.Helper()
	t.Logf("rank %d: WaitAll: %v\nClose: %v", rank, waitErr, closeErr)
	assert.ErrorIs(t, waitErr, dist.ErrGraphMismatch, "rank %d", rank)
	if rank != leaver || !errors.Is(waitErr, context.Canceled) {
		// The leaver returns when its context ends, unless the
		// exchange completed first.
		assert.ErrorContains(t, waitErr, `rank 0 made submission #0: codelet "a"`, "rank %d", rank)
	}
	assert.NoError(t, closeErr, "rank %d's Close", rank)
}

// TestEndedAtCheckExchange: the ranks' submissions differ, and one
// rank's WaitAll context ends right after the comparison that found it,
// before the exchange of the submissions. That rank gave the exchange
// up at once: in process it broke the communicator, so that no rank
// could name the difference (ErrGraphMismatch "(and exchanging the
// submissions: ... abandoned AllGather"), and under MPI the others
// waited in it until the stall timeout, for MPI_Finalize to refuse
// (TestMPIEndedAtCheckExchange). Every rank completed the comparison,
// so every rank makes the exchange: it now goes ahead whatever the
// context (bounded by the stall timeout), and every rank names the
// first difference.
func TestEndedAtCheckExchange(t *testing.T) {
	for _, tc := range []struct{ size, leaver int }{{2, 0}, {2, 1}, {3, 2}} {
		t.Run(fmt.Sprintf("ranks=%d/leaver=%d", tc.size, tc.leaver), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			waitErrs, closeErrs := make([]error, tc.size), make([]error, tc.size)
			err := local.Run(ctx, tc.size, func(ctx context.Context, c comm.Comm) error {
				var err error
				waitErrs[c.Rank()], closeErrs[c.Rank()], err = endedAtExchange(ctx, c, tc.leaver)
				return err
			})
			require.NoError(t, err)
			for r := range tc.size {
				checkEndedAtExchange(t, r, tc.leaver, waitErrs[r], closeErrs[r])
			}
			assert.NoError(t, ctx.Err(), "the ranks waited until the deadline")
		})
	}
}
