package scheduler

import (
	"context"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestIdleWorkerSleepsWhenCrowded: a worker that runs dry while the
// other workers awake take every P does not spin (even with a spin that
// never ends), since its spin would keep them, or the goroutines that
// submit, from running: it sleeps at once. Worker 0 holds a task; worker
// 1, with nothing to do, must fall asleep, where an unbounded spin
// would keep it polling for ever.
func TestIdleWorkerSleepsWhenCrowded(t *testing.T) {
	// Two Ps, whatever this machine has: the two workers fill them.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := New(ctx, WithWorkers(2), WithSpin(math.MaxInt), WithPolicy("eager"), WithPerfModelDir(""), WithGetenv(func(string) string { return "" }))
	require.NoError(t, err)
	defer s.Close()

	started, release := make(chan struct{}), make(chan struct{})
	require.NoError(t, s.Submit(ctx, &Codelet{Name: "hold", CPU: func(*Call) error {
		close(started)
		<-release
		return nil
	}}))
	<-started
	defer close(release)
	for s.nsleep.Load() == 0 {
		if ctx.Err() != nil {
			t.Fatal("the idle worker never slept: it spins though the workers awake take every P")
		}
		runtime.Gosched()
	}
	require.Equal(t, int32(1), s.nsleep.Load(), "one worker holds the task, the other sleeps")
}

// TestSpinningWorkerWakesOthers: tasks pushed while a worker spins wake
// nobody (it will pop one), so the worker that pops one wakes a sleeper
// for the rest, and each one woken does the same: n tasks that each
// wait until all n have started, submitted at once to n workers of
// which all but one sleep, all start. Without the chain of wake-ups the
// others would sleep on and the tasks wait for each other for ever.
func TestSpinningWorkerWakesOthers(t *testing.T) {
	for _, pol := range []string{"eager", "lws", "ws", "prio", "dmda"} {
		t.Run(pol, func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			const n = 4
			s, err := New(ctx, WithWorkers(n), WithSpin(math.MaxInt), WithPolicy(pol), WithPerfModelDir(""), WithGetenv(func(string) string { return "" }))
			require.NoError(t, err)
			defer s.Close()
			for s.nsleep.Load() != n-1 { // one spins (a P is free), the others sleep
				require.NoError(t, ctx.Err(), "the workers never settled: %d asleep", s.nsleep.Load())
				runtime.Gosched()
			}
			var all sync.WaitGroup
			all.Add(n)
			meet := &Codelet{Name: "meet", CPU: func(*Call) error {
				all.Done()
				all.Wait()
				return nil
			}}
			for range n {
				require.NoError(t, s.Submit(ctx, meet))
			}
			require.NoError(t, s.WaitAll(ctx))
		})
	}
}
