package scheduler

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDrivenPushWakes: a task a driven worker releases onto its own
// queue, when the application does not drive it again, is taken by a
// sleeping worker: the push wakes one (the scheduler's own workers skip
// that wake-up, as they pop their queue next). Worker 0 is asleep when
// the driven worker completes P and releases B and C: it runs one and
// queues the other; WaitAll returns only if worker 0 was woken for it.
func TestDrivenPushWakes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := New(ctx, WithWorkers(2), WithDrivenWorkers(1), WithPolicy("lws"), WithPerfModelDir(""), WithGetenv(func(string) string { return "" }))
	require.NoError(t, err)
	defer s.Close()
	d, err := s.Driver(1)
	require.NoError(t, err)
	require.NoError(t, d.Init())
	defer d.Deinit()

	started, release := make(chan struct{}), make(chan struct{})
	require.NoError(t, s.Submit(ctx, &Codelet{Name: "gate", CPU: func(*Call) error {
		close(started)
		<-release
		return nil
	}}))
	<-started // worker 0 is busy: P waits in a queue for the driven worker
	x := 0
	h, err := s.RegisterValue(&x)
	require.NoError(t, err)
	p := &Codelet{Name: "P", CPU: func(c *Call) error {
		if c.Worker != 1 {
			t.Errorf("P ran on worker %d, not the driven one", c.Worker)
			return nil
		}
		close(release)
		for !s.workers[0].sleeping.Load() { // the gate done, worker 0 finds nothing
			if ctx.Err() != nil {
				t.Error("worker 0 never slept")
				return nil
			}
			runtime.Gosched()
		}
		return nil
	}}
	noop := &Codelet{Name: "dep", CPU: func(*Call) error { return nil }}
	require.NoError(t, s.Submit(ctx, p, W(h)))
	require.NoError(t, s.Submit(ctx, noop, R(h)))
	require.NoError(t, s.Submit(ctx, noop, R(h)))
	for !d.RunOnce() { // takes P from its queue or worker 0's
		require.NoError(t, ctx.Err(), "the driven worker found no task")
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if err := s.WaitAll(wctx); err != nil {
		for d.RunOnce() { // drain, so that Close does not wait forever
		}
		t.Fatalf("the dependent queued on the driven worker never ran: %v", err)
	}
}

// TestDriverSharesLongTasks: tasks long enough to share (a few µs)
// make the driver ask workers to publish their completions as soon as
// they run dry (publishIdle), so that it sees at once that the launched
// worker has none, instead of after that worker fell asleep; empty tasks
// turn that off again (they cost less run by the driver than shared).
// How much it changes the share depends on the machine's wake-up
// latency (examples/leibniz: the launched worker's share went from 25-31%
// to 43-49% here), so the test checks the switch, and logs the share.
func TestDriverSharesLongTasks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := New(ctx, WithWorkers(2), WithDrivenWorkers(1), WithPolicy("lws"), WithPerfModelDir(""), WithGetenv(func(string) string { return "" }))
	require.NoError(t, err)
	defer s.Close()
	d, err := s.Driver(1)
	require.NoError(t, err)
	require.NoError(t, d.Init())
	defer d.Deinit()

	var on [2]atomic.Int64
	spin := &Codelet{Name: "spin", CPU: func(c *Call) error {
		for t0 := time.Now(); time.Since(t0) < 4*time.Microsecond; {
		}
		on[c.Worker].Add(1)
		return nil
	}}
	const n = 2000
	for range n {
		require.NoError(t, d.Submit(ctx, spin))
	}
	require.NoError(t, d.WaitAll(ctx))
	require.True(t, s.publishIdle.Load(), "4 µs tasks are worth sharing")
	t.Logf("launched worker ran %d of %d tasks", on[0].Load(), n)
	assert.Equal(t, int64(n), on[0].Load()+on[1].Load())

	// A sample is one task in 64, averaged: submit empty tasks until the
	// average falls (a sample taken while the goroutine was descheduled
	// would keep it up for a while on a loaded machine).
	empty := &Codelet{Name: "empty", CPU: func(*Call) error { return nil }}
	for i := 0; s.publishIdle.Load(); i++ {
		require.Less(t, i, 1_000_000, "empty tasks are cheaper run by the driver: the switch never went off")
		require.NoError(t, d.Submit(ctx, empty))
	}
	require.NoError(t, d.WaitAll(ctx))
}
