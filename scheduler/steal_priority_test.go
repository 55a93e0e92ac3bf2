package scheduler_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestStealTakesHighestPriority: under ws and lws a worker that has run
// its own queue steals from a busy worker's queue the tasks of the
// highest priority first, as WithPriority promises, not the lowest (a
// steal took the back of the queue, which is in priority order, so a
// busy worker's high-priority tasks ran last: [6 4 2 0 1 3 5 7]).
func TestStealTakesHighestPriority(t *testing.T) {
	ctx := testCtx(t)
	for _, p := range []string{"lws", "ws"} {
		t.Run(p, func(t *testing.T) {
			s := newSched(t, scheduler.WithPolicy(p), scheduler.WithWorkers(2))
			gates := []chan struct{}{make(chan struct{}), make(chan struct{})}
			var inside sync.WaitGroup
			inside.Add(2)
			block := &scheduler.Codelet{Name: "gate", CPU: func(c *scheduler.Call) error {
				inside.Done()
				select {
				case <-gates[c.Worker]:
				case <-ctx.Done():
				}
				return nil
			}}
			require.NoError(t, s.Submit(ctx, block))
			require.NoError(t, s.Submit(ctx, block))
			inside.Wait() // both workers are held, one gate task each

			const n = 8
			var mu sync.Mutex
			var order []int
			ran := make(chan struct{}, n)
			rec := &scheduler.Codelet{Name: "rec", CPU: func(c *scheduler.Call) error {
				mu.Lock()
				order = append(order, c.Arg.(int))
				mu.Unlock()
				ran <- struct{}{}
				return nil
			}}
			// Pushed from outside the workers: round-robin, so both
			// queues hold some.
			for i := range n {
				require.NoError(t, s.Submit(ctx, rec, scheduler.WithArg(i), scheduler.WithPriority(i)))
			}
			// Worker 0 alone runs: its own queue, then worker 1's by
			// stealing, while worker 1 is still held.
			close(gates[0])
			for range n {
				<-ran
			}
			close(gates[1])
			require.NoError(t, s.WaitAll(ctx))

			// Each queue runs highest priority first: the order is at
			// most two descending runs (the own queue, then the
			// stolen one).
			runs := 1
			for i := 1; i < len(order); i++ {
				if order[i] > order[i-1] {
					runs++
				}
			}
			assert.LessOrEqual(t, runs, 2, "run order %v: a steal took a lower priority before a higher one", order)
		})
	}
}
