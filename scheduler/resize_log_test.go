package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// A long program that creates and deletes a context per phase moves a
// worker in and out each time. Resizes keeps the latest 4,096 moves when
// the scheduler does not record: before, the log kept every move, and
// 20,000 phases of a soak run held 1.7 MB of it (about 110 bytes a
// phase, for ever). A recording scheduler (WithStats) keeps them all,
// as its trace draws every one.
func TestResizesLogBounded(t *testing.T) {
	const phases = 5000 // more than the 4,096 kept
	for _, record := range []bool{false, true} {
		t.Run(fmt.Sprintf("record=%v", record), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithStats(record))
			require.NoError(t, err)
			defer s.Close()
			noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
			name := func(i int) string { return fmt.Sprint("phase ", i) }
			for i := range phases {
				c, err := s.NewContext(name(i), scheduler.ContextSize(1))
				require.NoError(t, err)
				// The task runs once its worker has joined c: that
				// move is in the log by then.
				require.NoError(t, s.Submit(scheduler.Within(ctx, c), noop))
				require.NoError(t, c.WaitAll(ctx))
				require.NoError(t, c.Delete(nil))
				select {
				case <-c.Deleted():
				case <-ctx.Done():
					t.Fatalf("phase %d: context not deleted: %v", i, ctx.Err())
				}
			}
			rs := s.Resizes()
			joined := map[string]bool{}
			for _, r := range rs {
				joined[r.To] = true
			}
			if record {
				require.GreaterOrEqual(t, len(rs), phases)
				require.True(t, joined[name(0)], "a recording scheduler keeps the first move")
			} else {
				require.LessOrEqual(t, len(rs), 4096, "the log keeps the latest 4,096 moves")
				require.False(t, joined[name(0)], "the oldest moves are dropped")
			}
			require.True(t, joined[name(phases-1)], "the latest move is kept")
			// Each phase moves a worker into its context: ResizeCount
			// counts the moves Resizes no longer lists too (and the
			// moves back to the global context that the last deletion
			// may still be making).
			require.GreaterOrEqual(t, s.ResizeCount(), phases, "every move counted")
			if !record {
				require.Greater(t, s.ResizeCount(), len(rs))
			}
			for i := 1; i < len(rs); i++ {
				require.LessOrEqual(t, rs[i-1].At, rs[i].At, "in the order applied")
			}
		})
	}
}
