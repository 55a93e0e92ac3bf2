package dist

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
)

// TestClockRoundsAfterCutOffMerge: a merge cut off in its clock rounds
// leaves messages on clockTag, and the next merge's rounds must not take
// them for its own. On 2 in-process ranks, merge 1 is cut off: the
// root's round reaches rank 1, whose merge ended before its rounds, and
// the root gives up waiting for the answer (its context ends:
// "unanswered"), or rank 1 answers a round the root no longer waits for
// ("unread answer"). Merge 2 then completes
// on both ranks. Before the rounds carried the merge's number, rank 1
// answered the stale round first, the root met the answer to its own
// round 0 one round late (comm.ErrMismatch), and rank 1 waited for a
// round that never came, until its context ended.
func TestClockRoundsAfterCutOffMerge(t *testing.T) {
	for _, kind := range []string{"unanswered", "unread answer"} {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			var second [2]error
			var est []clockEstimate
			err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
				ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
				if err != nil {
					return err
				}
				defer ls.Close()
				d, err := New(ctx, c, ls)
				if err != nil {
					return err
				}
				defer d.Close()
				// Merge 1, cut off.
				switch {
				case kind == "unanswered" && d.rank == 0:
					// Rank 1 never answers: the root gives up.
					cctx, stop := context.WithTimeout(ctx, 50*time.Millisecond)
					_, err := d.clockOffsets(cctx, 0, 1)
					stop()
					if err == nil {
						t.Error("merge 1 completed without rank 1")
					}
				case kind == "unread answer" && d.rank == 1:
					// Rank 1 answers round 0 of merge 1 ...
					round := make([]int64, 2)
					if _, err := comm.Recv(ctx, d.c, round, 0, clockTag); err != nil {
						return err
					}
					if err := comm.Send(ctx, d.c, []int64{round[0], round[1], d.trace.clock().UnixNano()}, 0, clockTag); err != nil {
						return err
					}
				case kind == "unread answer" && d.rank == 0:
					// ... which the root, cut off once it sent the round,
					// never read.
					if err := comm.Send(ctx, d.c, []int64{1, 0}, 1, clockTag); err != nil {
						return err
					}
				}
				// Both past merge 1 (on the caller's communicator, not
				// the scheduler's).
				if err := c.Barrier(ctx); err != nil {
					return err
				}
				// Bounded: a rank that waits for a round that never comes
				// fails here rather than at the test's deadline.
				mctx, stop := context.WithTimeout(ctx, 10*time.Second)
				defer stop()
				e, err := d.clockOffsets(mctx, 0, 2)
				second[d.rank] = err
				if d.rank == 0 {
					est = e
				}
				return nil
			})
			require.NoError(t, err)
			assert.NoError(t, second[0], "the root's merge 2")
			assert.NoError(t, second[1], "rank 1's merge 2")
			if assert.Len(t, est, 2) {
				assert.GreaterOrEqual(t, est[1].Uncertainty, int64(0))
			}
		})
	}
}
