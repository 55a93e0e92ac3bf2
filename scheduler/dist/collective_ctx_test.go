package dist_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/pzgo/pz/scheduler/dist"
)

// TestCollectiveWithEndedContextOnOneRank: rank 0 calls Gather, Scatter,
// GatherMatrix or ScatterMatrix with a context that has ended, rank 1
// with a live one, and rank 0's program goes on (it closes its scheduler
// and stays until rank 1 returns). Before 0c79ffe rank 0 abandoned the
// blocking exchange of arguments, which broke the communicator: rank 1
// got an error at once. Since 0c79ffe the call is first compared as a
// submission, in a non-blocking comparison that rank 0 leaves without
// breaking anything; it records its failure, but rank 1 waited in the
// exchange of arguments (or in that comparison) for the stall timeout,
// for ever with dist.New alone (here: the 20 s deadline, in about 2 runs
// of 3). Now those waits end with the graph's failure.
func TestCollectiveWithEndedContextOnOneRank(t *testing.T) {
	calls := rootedCalls()
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			errs := make([]error, 2)
			oneDone := make(chan struct{})
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			err := runTiledPair(ctx, func(ctx context.Context, d *dist.Scheduler, tiles [][]*dist.Handle) error {
				if d.Rank() == 1 {
					errs[1] = call(ctx, d, tiles)
					close(oneDone)
					return nil
				}
				ended, end := context.WithCancel(ctx)
				end()
				errs[0] = call(ended, d, tiles)
				_ = d.Close()
				select {
				case <-oneDone:
				case <-ctx.Done():
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			assert.ErrorIs(t, errs[0], context.Canceled)
			assert.ErrorIs(t, errs[1], dist.ErrRankFailed, "rank 1 waited for rank 0")
			// Rank 1 hears of rank 0's stop as its message, or, when rank 0
			// gave up the graphs' comparison that rank 1 had joined, as
			// the communicator that broke under it (both ErrRankFailed,
			// naming rank 0); before 61d0427 it waited until the deadline.
			if msg := fmt.Sprint(errs[1]); !strings.Contains(msg, fmt.Sprintf(`rank 0: stopped submitting at "dist.%s"`, name)) &&
				!strings.Contains(msg, "rank 0 abandoned") {
				t.Errorf("rank 1's error does not name rank 0's stop: %v", errs[1])
			}
		})
	}
}
