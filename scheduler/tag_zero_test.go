package scheduler_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// Tag 0 means no tag: AfterTags(0) adds no dependency (as After(nil)
// adds none), so a loop AfterTags(prev) whose first task has none
// works, and WaitTag(0) waits for nothing; both waited for ever.
func TestTagZeroIsNoTag(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	var ran atomic.Int32
	cl := &scheduler.Codelet{Name: "step", CPU: func(*scheduler.Call) error { ran.Add(1); return nil }}
	short, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var prev scheduler.Tag
	for i := range 3 {
		tag := scheduler.Tag(100 + i)
		require.NoError(t, s.Submit(short, cl, scheduler.WithTag(tag), scheduler.AfterTags(prev), scheduler.Synchronous()), "task %d after tag %d", i, prev)
		prev = tag
	}
	require.NoError(t, s.WaitTag(short, 0), "WaitTag(0)")
	require.NoError(t, s.WaitAll(short))
	require.EqualValues(t, 3, ran.Load())
}

// WaitTag for a tag that no task carries ends at Close, which makes it
// a wait nothing can end (ErrNotSubmitted), and so does a WaitTag
// after Close; both waited for ever. The tag may have tasks waiting
// for it (AfterTags) or not.
func TestWaitTagEndsAtClose(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	nop := &scheduler.Codelet{Name: "nop", CPU: func(*scheduler.Call) error { return nil }}
	require.NoError(t, s.Submit(ctx, nop, scheduler.AfterTags(7)))
	waits := make(chan error, 2)
	go func() { waits <- s.WaitTag(ctx, 7) }()
	go func() { waits <- s.WaitTag(ctx, 8) }()
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	for range 2 {
		select {
		case err := <-waits:
			require.ErrorIs(t, err, scheduler.ErrNotSubmitted)
		case <-ctx.Done():
			t.Fatal("WaitTag of a tag no task carries still waits after Close")
		}
	}
	require.ErrorIs(t, <-closed, scheduler.ErrCanceled) // the task after tag 7
	err := s.WaitTag(ctx, 9)
	require.ErrorIs(t, err, scheduler.ErrNotSubmitted)
	require.ErrorContains(t, err, "tag 9")
}
