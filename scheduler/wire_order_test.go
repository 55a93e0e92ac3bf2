package scheduler_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// Two goroutines submit tasks that write the same four handles, each
// listing them in a different order. Wiring a task's handles one at a time
// could order task A before B on one handle and B before A on another, a
// cycle that never runs; every task must run, exactly once.
func TestConcurrentSubmittersShareHandlesNoCycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, pol := range scheduler.Policies() {
		t.Run(pol, func(t *testing.T) {
			s, err := scheduler.New(ctx, scheduler.WithPolicy(pol), scheduler.WithWorkers(2), scheduler.WithPerfModelDir(""))
			require.NoError(t, err)
			var hs [4]*scheduler.Handle
			for i := range hs {
				hs[i], err = s.RegisterValue(new(int))
				require.NoError(t, err)
			}
			var ran atomic.Int64
			cl := &scheduler.Codelet{Name: "touch", CPU: func(*scheduler.Call) error { ran.Add(1); return nil }}
			const perSubmitter = 3000
			var wg sync.WaitGroup
			for g := range 2 {
				wg.Go(func() {
					for i := range perSubmitter {
						// Rotate the order so that the submitters disagree.
						o := (i + 2*g) % 4
						err := s.Submit(ctx, cl, scheduler.RW(hs[o]), scheduler.RW(hs[(o+1)%4]),
							scheduler.RW(hs[(o+2)%4]), scheduler.RW(hs[(o+3)%4]))
						if err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
			defer wcancel()
			// On failure the scheduler is leaked: Close would wait for
			// the stuck tasks forever.
			require.NoError(t, s.WaitAll(wctx), "tasks stuck: a dependency cycle between submitters")
			require.EqualValues(t, 2*perSubmitter, ran.Load())
			require.NoError(t, s.Close())
		})
	}
}
