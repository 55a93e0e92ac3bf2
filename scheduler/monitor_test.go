package scheduler_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestRemoveMonitorLeavesAReplacement: RemoveMonitor removes only the
// monitor it names; one installed since keeps seeing the tasks.
func TestRemoveMonitorLeavesAReplacement(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1))
	old := &eventMonitor{popName: "x", popped: make(chan int, 1)}
	cur := &eventMonitor{popName: "x", popped: make(chan int, 1)}
	s.SetMonitor(old, time.Hour)
	s.SetMonitor(cur, time.Hour)
	assert.False(t, s.RemoveMonitor(old), "old was replaced")
	require.NoError(t, s.Submit(ctx, &scheduler.Codelet{Name: "x", CPU: func(*scheduler.Call) error { return nil }}))
	select {
	case <-cur.popped:
	case <-time.After(10 * time.Second):
		t.Fatal("the current monitor did not see the task")
	}
	require.NoError(t, s.WaitAll(ctx))
	assert.True(t, s.RemoveMonitor(cur))
	assert.False(t, s.RemoveMonitor(cur), "already removed")
}
