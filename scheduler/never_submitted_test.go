package scheduler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// Tasks named in After but never submitted are reported by codelet
// name, one line per name: two never-submitted tasks of one codelet,
// each awaited by a task, made two identical lines.
func TestNeverSubmittedGroupedByName(t *testing.T) {
	ctx := context.Background()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	defer s.Close()
	nop := &scheduler.Codelet{Name: "nop", CPU: func(*scheduler.Call) error { return nil }}
	other := &scheduler.Codelet{Name: "other", CPU: func(*scheduler.Call) error { return nil }}
	e1, e2, e3 := scheduler.NewTask(nop), scheduler.NewTask(nop), scheduler.NewTask(other)
	require.NoError(t, s.Submit(ctx, nop, scheduler.After(e1)))
	require.NoError(t, s.Submit(ctx, nop, scheduler.After(e2)))
	require.NoError(t, s.Submit(ctx, nop, scheduler.After(e2)))
	require.NoError(t, s.Submit(ctx, nop, scheduler.After(e3)))

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond) // nothing can end these waits
	err = s.WaitAll(short)
	cancel()
	require.ErrorIs(t, err, scheduler.ErrNotSubmitted)
	msg := err.Error()
	assert.Contains(t, msg, `3 tasks wait (After) for 2 tasks "nop", which were never submitted; submit them`)
	assert.Contains(t, msg, `1 task waits (After) for task "other", which was never submitted; submit it`)
	assert.Equal(t, 2, strings.Count(msg, "(After) for"), msg)
	assert.Less(t, strings.Index(msg, `"nop"`), strings.Index(msg, `"other"`), "in the order of the names: %s", msg)

	for _, e := range []*scheduler.Task{e1, e2, e3} {
		require.NoError(t, s.SubmitTask(ctx, e))
	}
	require.NoError(t, s.WaitAll(ctx))
}
