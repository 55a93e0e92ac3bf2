package scheduler_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestWaitTagDeadlineNamesUnsubmittedTag checks that a WaitTag whose
// context ends while no submitted task carries the tag says so, as
// WaitAll's deadline error does, and that a tag carried by a pending
// task is not reported as never submitted.
func TestWaitTagDeadlineNamesUnsubmittedTag(t *testing.T) {
	ctx := context.Background()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1))
	require.NoError(t, err)
	ended, cancel := context.WithCancel(ctx)
	cancel()
	err = s.WaitTag(ended, 42)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, scheduler.ErrNotSubmitted)
	assert.Contains(t, err.Error(), "no submitted task carries tag 42; submit a task WithTag(42)")

	gate := make(chan struct{})
	block := &scheduler.Codelet{Name: "block", CPU: func(*scheduler.Call) error { <-gate; return nil }}
	require.NoError(t, s.Submit(ctx, block, scheduler.WithTag(7)))
	err = s.WaitTag(ended, 7)
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, errors.Is(err, scheduler.ErrNotSubmitted), "tag 7 is carried: %v", err)
	close(gate)
	require.NoError(t, s.WaitTag(ctx, 7))
	require.NoError(t, s.Close())
}
