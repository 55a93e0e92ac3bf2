package scheduler_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// Trial finding: deleting b with an inheritor a that is being deleted
// (its last tasks still running) said `inheritor "a" of "b" is deleted`,
// which a user checking a.Deleted() found untrue; it says "being
// deleted" now, and where the workers would go.
func TestContextInheritorBeingDeletedNamed(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	a, err := s.NewContext("a", scheduler.ContextWorkers(0))
	require.NoError(t, err)
	b, err := s.NewContext("b", scheduler.ContextWorkers(1))
	require.NoError(t, err)
	release := make(chan struct{})
	started := make(chan struct{})
	block := &scheduler.Codelet{Name: "block", CPU: func(*scheduler.Call) error {
		close(started)
		<-release
		return nil
	}}
	require.NoError(t, s.Submit(ctx, block, scheduler.InContext(a)))
	<-started
	require.NoError(t, a.Delete(nil))
	for _, err := range []error{b.Delete(a), b.SetInheritor(a)} {
		if assert.ErrorIs(t, err, scheduler.ErrBadContext) {
			assert.Contains(t, err.Error(), `inheritor "a" of "b" is being deleted`)
		}
	}
	close(release)
	<-a.Deleted()
	err = b.Delete(a)
	if assert.ErrorIs(t, err, scheduler.ErrBadContext) {
		assert.Contains(t, err.Error(), `inheritor "a" of "b" is deleted`)
	}
	require.NoError(t, b.Delete(nil))
}
