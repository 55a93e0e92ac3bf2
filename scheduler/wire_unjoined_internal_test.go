package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWireUnusableHandleCountsJoinedListsOnly: a pooled task whose handle
// is unregistered between validate and wire (a concurrent Unregister)
// joins the lists of its other handles only, and wireAccesses sets its
// references to its execution's plus one per list joined (4ba84b1:
// wireState.unjoined): it goes back to the pool exactly when the last
// list that holds it drops it, not before and not never.
func TestWireUnusableHandleCountsJoinedListsOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := New(ctx, WithWorkers(1), WithPerfModelDir(""))
	require.NoError(t, err)
	defer s.Close()
	a, b := make([]float64, 1), make([]float64, 1)
	h1, err := s.RegisterVector(a)
	require.NoError(t, err)
	h2, err := s.RegisterVector(b)
	require.NoError(t, err)
	nop := &Codelet{Name: "nop", CPU: func(*Call) error { return nil }}

	// submitHeld's steps up to wire, with h2 unregistered after validate.
	x := s.newTask(nop, []Arg{RW(h1), R(h2)})
	require.True(t, x.pooled)
	storeUnpublishedU(&x.state, stateSubmitted)
	require.NoError(t, s.validate(x))
	_, err = h2.Unregister(ctx)
	require.NoError(t, err)
	s.inflight.add(1)
	x.Context = s.cx.global
	x.s = s
	edges := s.wire(x)
	assert.EqualValues(t, 2, x.refs.Load(), "its execution's and h1's list's")
	x.mu.Lock()
	assert.ErrorIs(t, x.depErr, ErrUnregistered)
	x.mu.Unlock()
	if edges == 0 || x.pending.Add(edges) == 0 {
		s.ready(x, nil)
	}
	_ = s.WaitAll(ctx) // x failed: h2 was unregistered

	// h1's list still holds x (its execution's reference is gone): a
	// writer moves it to prev, the next writer drops it, which frees it
	// on this goroutine (zeroed: no codelet).
	require.NoError(t, s.Submit(ctx, nop, W(h1)))
	require.NoError(t, s.WaitAll(ctx))
	require.NotNil(t, x.Codelet, "freed while h1's list still held it")
	require.NoError(t, s.Submit(ctx, nop, W(h1)))
	require.Nil(t, x.Codelet, "not freed once no list held it")
	require.NoError(t, s.WaitAll(ctx))
}
