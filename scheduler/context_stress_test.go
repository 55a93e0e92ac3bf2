package scheduler

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestContextStress keeps thousands of tasks in flight in three contexts
// (independent tasks and chains on shared handles) while a goroutine
// moves a random worker between contexts every 50 submissions. It checks
// that every task runs exactly once, on a worker that was in the task's
// context when it took the task (a worker's popping set changes only at
// its own safe points, so it is stable while the task runs), and that
// the chains' counters equal the number of increments submitted.
func TestContextStress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const workers = 6
	n := 80000
	if testing.Short() {
		n = 5000
	}
	for _, pol := range []string{"lws", "eager", "dmda", "random"} {
		t.Run(pol, func(t *testing.T) {
			s, err := New(ctx, WithWorkers(workers), WithPolicy(pol), WithPerfModelDir(""), WithGetenv(func(string) string { return "" }))
			require.NoError(t, err)
			defer s.Close()
			cs := make([]*Context, 3)
			for i := range cs {
				cs[i], err = s.NewContext(string(rune('a'+i)), ContextWorkers(2*i, 2*i+1), ContextPolicy([]string{pol, "ws", "prio"}[i]))
				require.NoError(t, err)
			}
			runs := make([]atomic.Int32, n)
			var outside atomic.Int64
			check := func(c *Call) {
				if !s.workers[c.Worker].popsFrom(c.Task.Context) {
					outside.Add(1)
				}
				runs[c.Arg.(int)].Add(1)
			}
			indep := &Codelet{Name: "indep", CPU: func(c *Call) error { check(c); return nil }}
			incr := &Codelet{Name: "incr", CPU: func(c *Call) error {
				check(c)
				*ValueOf[*int](c, 0)++
				return nil
			}}
			counters := make([]int, 8)
			hs := make([]*Handle, len(counters))
			for i := range hs {
				hs[i], err = s.RegisterValue(&counters[i])
				require.NoError(t, err)
			}
			want := make([]int, len(counters))

			ticks := make(chan struct{}, 64)
			tick := func() {
				select {
				case ticks <- struct{}{}:
				default: // the mover has moves to do already
				}
			}
			var wg sync.WaitGroup
			var moves atomic.Int64
			wg.Add(1)
			go func() { // the mover, one move asked for per tick
				defer wg.Done()
				rng := rand.New(rand.NewPCG(7, 11))
				for range ticks {
					w := rng.IntN(workers)
					from := s.WorkerContext(w)
					to := cs[rng.IntN(len(cs))]
					if from == to || from.Parent() == nil {
						continue
					}
					if err := s.MoveWorkers(from, to, w); err != nil {
						t.Error(err)
						return
					}
					moves.Add(1)
				}
			}()
			rng := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < n; i++ {
				c := cs[rng.IntN(len(cs))]
				if i%3 == 0 {
					k := rng.IntN(len(hs))
					want[k]++
					require.NoError(t, s.Submit(ctx, incr, RW(hs[k]), InContext(c), WithArg(i)))
				} else {
					require.NoError(t, s.Submit(Within(ctx, c), indep, WithArg(i)))
				}
				if i%50 == 49 {
					tick()
				}
				if i%2000 == 1999 {
					// Let moves interleave with execution: wait until
					// the workers have worked off half of what is queued.
					// When nothing completes for a while (the moves left
					// the contexts holding the rest without workers),
					// move one more worker.
					last, still := s.Global().Pending(), 0
					for p := last; p > 1000 && ctx.Err() == nil; p = s.Global().Pending() {
						if p != last {
							last, still = p, 0
						} else if still++; still == 10000 {
							tick()
							still = 0
						}
						runtime.Gosched()
					}
				}
			}
			close(ticks)
			wg.Wait()
			// The moves may have left a context without workers: give
			// each its first two back, then wait for everything.
			for i, c := range cs {
				for _, id := range []int{2 * i, 2*i + 1} {
					if from := s.WorkerContext(id); from != c {
						require.NoError(t, s.MoveWorkers(from, c, id))
					}
				}
			}
			require.NoError(t, s.WaitAll(ctx))
			for i := range runs {
				if runs[i].Load() != 1 {
					t.Fatalf("task %d ran %d times", i, runs[i].Load())
				}
			}
			assert.Zero(t, outside.Load(), "tasks run by a worker outside their context")
			for i, h := range hs {
				_, err := h.Unregister(ctx)
				require.NoError(t, err)
				assert.Equal(t, want[i], counters[i], "counter %d", i)
			}
			assert.Greater(t, moves.Load(), int64(10))
			assert.NotEmpty(t, s.Resizes())
			t.Logf("%d tasks, %d moves requested, %d applied", n, moves.Load(), len(s.Resizes()))
		})
	}
}
