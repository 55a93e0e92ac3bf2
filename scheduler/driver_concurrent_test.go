package scheduler_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestDriverConcurrentCallsRefused: while one goroutine runs a task in
// RunOnce, the same Driver used from another goroutine does not run the
// worker a second time: RunOnce returns false, Submit queues its task
// (past the submit limit, it would run it at once), and Init, Run,
// Deinit and WaitAll fail with ErrDriver saying the Driver is in use
// (Deinit used to retire the worker under its running task). Once the
// first call returns, the other goroutine may use the Driver.
func TestDriverConcurrentCallsRefused(t *testing.T) {
	ctx := testCtx(t)
	s, d := drivenSched(t, 1) // the driven worker alone runs the tasks
	d.SetSubmitLimit(1)
	started, gate := make(chan struct{}, 2), make(chan struct{})
	var opened sync.Once
	open := func() { opened.Do(func() { close(gate) }) }
	defer open() // a failed check must not leave the task (and Close) waiting
	gated := &scheduler.Codelet{Name: "gated", CPU: func(*scheduler.Call) error {
		started <- struct{}{}
		<-gate
		return nil
	}}
	var quick atomic.Int64
	noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { quick.Add(1); return nil }}
	require.NoError(t, s.Submit(ctx, gated))
	require.NoError(t, s.Submit(ctx, gated))
	ranA := make(chan bool, 1)
	go func() { ranA <- d.RunOnce() }()
	<-started // the first gated task runs in RunOnce on that goroutine

	ranB := make(chan bool, 1)
	go func() { ranB <- d.RunOnce() }()
	select {
	case ran := <-ranB:
		assert.False(t, ran, "a second goroutine's RunOnce ran a task")
	case <-started:
		t.Error("a second goroutine's RunOnce ran the worker's cycle while the first ran a task")
		open()
		<-ranB
	}
	require.NoError(t, d.Submit(ctx, noop))
	assert.Zero(t, quick.Load(), "Submit ran its task at once while another goroutine drove the worker")
	for op, call := range map[string]func() error{
		"WaitAll": func() error { return d.WaitAll(ctx) },
		"Deinit":  d.Deinit,
		"Init":    d.Init,
		"Run":     func() error { return d.Run(ctx) },
	} {
		err := call()
		require.ErrorIs(t, err, scheduler.ErrDriver, op)
		assert.Contains(t, err.Error(), "in use", op)
	}
	open()
	assert.True(t, <-ranA)
	// The first call ended: this goroutine may drive the worker now.
	require.NoError(t, d.WaitAll(ctx))
	assert.Equal(t, int64(1), quick.Load())
	require.NoError(t, d.Deinit())
}

// TestDriverConcurrentUse: two goroutines calling RunOnce in loops and a
// third calling WaitAll in a loop on one Driver (the calls that take
// it) never run two tasks on the driven worker at the same time, and
// every task runs; each task's code calls the Driver's Submit past the
// submit limit, which queues its child instead of running it inside the
// task. Submit from other goroutines is left out: it does not take the
// Driver, and only queues safely while one of those calls holds it (see
// Driver; TestDriverConcurrentCallsRefused). Run with -race.
func TestDriverConcurrentUse(t *testing.T) {
	ctx := testCtx(t)
	s, d := drivenSched(t, 1)
	d.SetSubmitLimit(1)
	const n = 300
	var inside, overlaps, ran atomic.Int64
	child := &scheduler.Codelet{Name: "child", CPU: func(*scheduler.Call) error {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		inside.Add(-1)
		ran.Add(1)
		return nil
	}}
	parent := &scheduler.Codelet{Name: "parent", CPU: func(*scheduler.Call) error {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		err := d.Submit(ctx, child) // queued: not run inside this task
		inside.Add(-1)
		ran.Add(1)
		return err
	}}
	for range n {
		require.NoError(t, s.Submit(ctx, parent))
	}
	var wg sync.WaitGroup
	loop := func(call func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ran.Load() < 2*n {
				call()
			}
		}()
	}
	loop(func() { d.RunOnce() })
	loop(func() { d.RunOnce() })
	errs := make(chan error, 1)
	loop(func() {
		// nil when it drove the tasks to the end, ErrDriver while a
		// RunOnce holds the Driver.
		if err := d.WaitAll(ctx); err != nil && !errors.Is(err, scheduler.ErrDriver) {
			select {
			case errs <- err:
			default:
			}
		}
	})
	wg.Wait()
	close(errs)
	require.NoError(t, <-errs)
	assert.Zero(t, overlaps.Load(), "tasks ran at the same time on the driven worker")
	assert.Equal(t, int64(2*n), ran.Load())
	require.NoError(t, d.WaitAll(ctx))
	require.NoError(t, d.Deinit())
}
