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

// TestDriverSynchronousAfterHeld: a Synchronous Driver.Submit of a task
// that waits, through its data or a tag, for a task a Batch holds flushes
// the batches as Task.Wait (Scheduler.Submit's Synchronous) does, instead
// of driving the worker until ctx ends (for ever with a plain ctx): the
// Driver waited on the task's Done channel without flushing.
func TestDriverSynchronousAfterHeld(t *testing.T) {
	ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
	defer cancel()
	s, d := drivenSched(t, 2)
	defer d.Deinit()
	var ran atomic.Int32
	cl := &scheduler.Codelet{Name: "step", CPU: func(*scheduler.Call) error { ran.Add(1); return nil }}
	var x int
	h, err := s.RegisterValue(&x, scheduler.Named("x"))
	require.NoError(t, err)

	b := s.NewBatch()
	require.NoError(t, b.Submit(ctx, cl, scheduler.RW(h)))
	require.NoError(t, d.Submit(ctx, cl, scheduler.RW(h), scheduler.Synchronous()), "after a held task on the same data")
	assert.Equal(t, int32(2), ran.Load())
	assert.Zero(t, b.Len())

	require.NoError(t, b.Submit(ctx, cl, scheduler.WithTag(9)))
	require.NoError(t, d.SubmitTask(ctx, scheduler.NewTask(cl, scheduler.AfterTags(9), scheduler.Synchronous())), "after a held tag")
	assert.Equal(t, int32(4), ran.Load())
	assert.Zero(t, b.Len())
}
