package scheduler_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestTracedTaskDepsAreTheCallers: the Deps of a TracedTask (from
// TracedTasks or CriticalPath) belong to the caller: changing them, or
// appending to them, changes neither what later calls return nor the
// trace written afterwards, nor what another caller holds.
func TestTracedTaskDepsAreTheCallers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithStats(true), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	defer s.Close()
	put := &scheduler.Codelet{Name: "put", CPU: func(*scheduler.Call) error { return nil }}
	sum := &scheduler.Codelet{Name: "sum", CPU: func(*scheduler.Call) error { return nil }}
	var a, b, c int
	var hs []*scheduler.Handle
	for _, p := range []*int{&a, &b, &c} {
		h, err := s.RegisterValue(p)
		require.NoError(t, err)
		hs = append(hs, h)
		require.NoError(t, s.Submit(ctx, put, scheduler.W(h)))
	}
	// Three dependencies: the tracer's slice has room beyond them, so an
	// append by a caller that shares it writes into the tracer's memory.
	require.NoError(t, s.Submit(ctx, sum, scheduler.R(hs[0]), scheduler.R(hs[1]), scheduler.R(hs[2])))
	require.NoError(t, s.WaitAll(ctx))

	sumOf := func(tasks []scheduler.TracedTask) scheduler.TracedTask {
		t.Helper()
		for _, tt := range tasks {
			if tt.Name == "sum" {
				return tt
			}
		}
		t.Fatalf("no task sum in %v", tasks)
		return scheduler.TracedTask{}
	}
	want := sumOf(s.TracedTasks()).Deps
	require.Len(t, want, 3)
	want = append([]uint64(nil), want...)
	var before bytes.Buffer
	require.NoError(t, s.WriteTrace(&before))

	first := sumOf(s.TracedTasks())
	mine := append(first.Deps, 1001)
	second := sumOf(s.TracedTasks())
	theirs := append(second.Deps, 2002)
	assert.Equal(t, uint64(1001), mine[3], "another caller's append overwrote this caller's")
	assert.Equal(t, uint64(2002), theirs[3])
	first.Deps[0] = 999
	assert.Equal(t, want, second.Deps, "one caller's change reached another caller's Deps")
	assert.Equal(t, want, sumOf(s.TracedTasks()).Deps, "a caller's change reached the trace")
	path := s.CriticalPath()
	require.NotEmpty(t, path)
	last := path[len(path)-1]
	require.Equal(t, "sum", last.Name)
	last.Deps[1] = 998
	assert.Equal(t, want, sumOf(s.TracedTasks()).Deps, "a change to CriticalPath's Deps reached the trace")
	var after bytes.Buffer
	require.NoError(t, s.WriteTrace(&after))
	assert.Equal(t, before.String(), after.String(), "the Chrome trace changed with the caller's Deps")
}
