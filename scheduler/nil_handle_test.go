package scheduler_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestNilHandleMethods: a program that dropped a Register error and
// calls a method on the nil handle gets ErrBadData naming the call, as
// Submit does for a nil handle in an access, instead of a nil pointer
// dereference panic in the scheduler.
func TestNilHandleMethods(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1))
	var h *scheduler.Handle // what RegisterMatrix returns with its error
	cl := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}

	check := func(what string, err error) {
		t.Helper()
		require.Error(t, err, what)
		assert.True(t, errors.Is(err, scheduler.ErrBadData), "%s: %v", what, err)
		assert.Contains(t, err.Error(), what+" of a nil handle")
	}
	_, err := h.Partition(scheduler.Blocks(2, 2))
	check("Partition", err)
	check("Unpartition", h.Unpartition())
	check("SetReduction", h.SetReduction(cl, cl))
	_, err = h.Fetch(ctx)
	check("Fetch", err)
	_, err = h.Unregister(ctx)
	check("Unregister", err)

	// The scheduler is unaffected.
	require.NoError(t, s.Submit(ctx, cl, scheduler.Synchronous()))
}
