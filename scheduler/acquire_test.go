package scheduler_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// gated returns a codelet that waits for gate, then adds 1 to its value
// (buffer 0), and a channel closed once it has started.
func gated(name string, gate <-chan struct{}) (*scheduler.Codelet, <-chan struct{}) {
	started := make(chan struct{})
	var once atomic.Bool
	return &scheduler.Codelet{Name: name, CPU: func(c *scheduler.Call) error {
		if once.CompareAndSwap(false, true) {
			close(started)
		}
		<-gate
		*scheduler.ValueOf[*int64](c, 0) += 1
		return nil
	}}, started
}

// Fetch and Data wait for the tasks submitted before them, as StarPU's
// starpu_data_acquire does: right after submitting a writer, they return
// its result, not the value before it.
func TestFetchAndDataWaitForSubmittedWriters(t *testing.T) {
	for _, access := range []string{"Fetch", "Data"} {
		t.Run(access, func(t *testing.T) {
			ctx := testCtx(t)
			s := newSched(t, scheduler.WithWorkers(2))
			x := int64(41)
			h, err := s.RegisterValue(&x)
			require.NoError(t, err)
			gate := make(chan struct{})
			cl, started := gated("write", gate)
			require.NoError(t, s.Submit(ctx, cl, scheduler.RW(h)))
			<-started // the writer runs, and waits for the gate
			got := make(chan int64)
			go func() {
				var v any
				if access == "Fetch" {
					v, err = h.Fetch(ctx)
				} else {
					v = h.Data()
				}
				got <- *v.(*int64)
			}()
			// While the writer waits for the gate, a Fetch bounded by a
			// deadline meets the deadline (it returned 41 at once when it
			// did not wait), and the access above has not returned.
			short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			_, ferr := h.Fetch(short)
			cancel()
			require.ErrorIs(t, ferr, context.DeadlineExceeded, "Fetch while the writer runs")
			select {
			case v := <-got:
				t.Fatalf("%s returned %d while the writer was running", access, v)
			default:
			}
			close(gate) // the host's access can only end after the writer
			assert.EqualValues(t, 42, <-got)
			require.NoError(t, err)
			require.NoError(t, s.WaitAll(ctx))
		})
	}
}

// Fetch waits for writers only: readers submitted before it may still
// run. Data waits for them too (the host is about to write).
func TestFetchDoesNotWaitForReaders(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	x := int64(7)
	h, err := s.RegisterValue(&x)
	require.NoError(t, err)
	gate := make(chan struct{})
	started := make(chan struct{})
	read := &scheduler.Codelet{Name: "read", CPU: func(*scheduler.Call) error {
		close(started)
		<-gate
		return nil
	}}
	require.NoError(t, s.Submit(ctx, read, scheduler.R(h)))
	<-started
	v, err := h.Fetch(ctx) // the reader is still running
	require.NoError(t, err)
	assert.EqualValues(t, 7, *v.(*int64))
	dataDone := make(chan struct{})
	go func() {
		h.Data()
		close(dataDone)
	}()
	select {
	case <-dataDone:
		t.Fatal("Data returned while a reader submitted before it ran")
	default:
	}
	close(gate)
	<-dataDone
	require.NoError(t, s.WaitAll(ctx))
}

// A Fetch whose context ends while a writer runs returns the context's
// error; the writer goes on.
func TestFetchWaitCanceled(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1))
	x := int64(1)
	h, err := s.RegisterValue(&x)
	require.NoError(t, err)
	gate := make(chan struct{})
	cl, started := gated("write", gate)
	require.NoError(t, s.Submit(ctx, cl, scheduler.RW(h)))
	<-started
	fctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = h.Fetch(fctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "Fetch of value handle *int64: waiting for the tasks submitted on it")
	close(gate)
	require.NoError(t, s.WaitAll(ctx))
	v, err := h.Fetch(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 2, *v.(*int64))
}

// A reduction pending on the handle is combined before Fetch reads it.
func TestFetchCombinesPendingReduction(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	x := int64(0)
	h, err := s.RegisterValue(&x)
	require.NoError(t, err)
	zero := &scheduler.Codelet{Name: "zero", CPU: func(c *scheduler.Call) error { *scheduler.ValueOf[*int64](c, 0) = 0; return nil }}
	sum := &scheduler.Codelet{Name: "sum", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*int64](c, 0) += *scheduler.ValueOf[*int64](c, 1)
		return nil
	}}
	require.NoError(t, h.SetReduction(zero, sum))
	add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error { *scheduler.ValueOf[*int64](c, 0) += 3; return nil }}
	for range 10 {
		require.NoError(t, s.Submit(ctx, add, scheduler.Redux(h)))
	}
	v, err := h.Fetch(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 30, *v.(*int64))
	require.NoError(t, s.WaitAll(ctx))
}

// Fetch from a task's code that would wait is refused (ErrInTask);
// Data there returns at once.
func TestFetchInsideTask(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	x, y := int64(0), int64(0)
	hx, _ := s.RegisterValue(&x)
	hy, _ := s.RegisterValue(&y)
	gate := make(chan struct{})
	cl, started := gated("write", gate)
	require.NoError(t, s.Submit(ctx, cl, scheduler.RW(hy)))
	<-started
	var fetchErr error
	var data any
	peeked := make(chan struct{})
	// peek runs on the other worker while write holds hy.
	require.NoError(t, s.Submit(ctx, &scheduler.Codelet{Name: "peek", CPU: func(*scheduler.Call) error {
		_, fetchErr = hy.Fetch(ctx)
		data = hy.Data()
		close(peeked)
		return nil
	}}, scheduler.RW(hx)))
	<-peeked
	close(gate)
	require.NoError(t, s.WaitAll(ctx))
	require.ErrorIs(t, fetchErr, scheduler.ErrInTask)
	assert.Contains(t, fetchErr.Error(), `Fetch of value handle *int64 called by the code of task of codelet "peek"`)
	assert.Same(t, &y, data)
}
