package scheduler

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBatchHeldDuringCloseRuns: a Batch.Submit that passed Close's
// closed check (so Close waits for its task) but held the task only
// after Close's last flush left it held for a Flush nobody would call,
// and Close waited for ever (found by a trial submitting through a batch
// while another goroutine closed the scheduler: about one round in a
// hundred hung with Len() 1). A task held once Close has started is
// flushed at once. The submission is stopped inside its wiring by the
// lock of its handle until Close waits for the tasks in flight.
func TestBatchHeldDuringCloseRuns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := New(ctx, WithWorkers(1), WithPerfModelDir(""), WithGetenv(func(string) string { return "" }))
	require.NoError(t, err)
	var x int
	h, err := s.RegisterValue(&x)
	require.NoError(t, err)
	b := s.NewBatch()
	cl := &Codelet{Name: "inc", CPU: func(c *Call) error { *ValueOf[*int](c, 0)++; return nil }}

	s.handleMu.Lock() // the submission below waits here, wiring its access
	submitted := make(chan error, 1)
	go func() { submitted <- b.Submit(ctx, cl, RW(h)) }()
	for s.inflight.n.Load() == 0 { // counted: past the closed check
		runtime.Gosched()
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	for s.inflight.nw.Load() == 0 { // Close waits for the tasks in flight
		runtime.Gosched()
	}
	s.handleMu.Unlock()
	require.NoError(t, <-submitted)
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-ctx.Done():
		b.Flush() // let Close end
		<-closed
		t.Fatal("Close waited for ever for a task a Batch took while it closed")
	}
	require.Equal(t, 1, x)
}

// TestBatchUnmade: a zero Batch (declared, not made by NewBatch) and a
// nil *Batch refuse submissions with an error that says how to make
// one; they panicked (nil pointer dereference) in Submit and SubmitTask,
// and a nil one in Flush and Len too.
func TestBatchUnmade(t *testing.T) {
	ctx := context.Background()
	cl := &Codelet{Name: "step", CPU: func(*Call) error { return nil }}
	var zero Batch
	var nilb *Batch
	for _, b := range []*Batch{&zero, nilb} {
		err := b.Submit(ctx, cl)
		require.ErrorIs(t, err, ErrBadOption)
		require.ErrorContains(t, err, `Batch.Submit of "step"`)
		require.ErrorContains(t, err, "Scheduler.NewBatch")
		err = b.SubmitTask(ctx, NewTask(cl))
		require.ErrorIs(t, err, ErrBadOption)
		require.ErrorContains(t, err, "Scheduler.NewBatch")
		require.ErrorIs(t, b.SubmitTask(ctx, nil), ErrBadOption)
		b.Flush()
		require.Zero(t, b.Len())
	}
}
