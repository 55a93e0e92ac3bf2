package scheduler_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestWorkerNames: WithWorkerNames names the workers it gives in
// WorkerName, the trace's threads and the chart's rows; the others keep
// cpu<w>.
func TestWorkerNames(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithStats(true),
		scheduler.WithWorkerNames(map[int]string{1: "rank 3 cpu0"}))
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, "cpu0", s.WorkerName(0))
	assert.Equal(t, "rank 3 cpu0", s.WorkerName(1))
	var trace bytes.Buffer
	require.NoError(t, s.WaitAll(ctx))
	require.NoError(t, s.WriteTrace(&trace))
	assert.Contains(t, trace.String(), `"rank 3 cpu0"`)
}

// TestWorkerNamesRefused: a name for a worker that is not a CPU worker,
// or an empty name, is refused by New, naming the worker.
func TestWorkerNamesRefused(t *testing.T) {
	ctx := testCtx(t)
	for _, names := range []map[int]string{{2: "x"}, {-1: "x"}, {0: ""}} {
		_, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithWorkerNames(names))
		require.ErrorIs(t, err, scheduler.ErrBadOption)
		for w := range names {
			assert.Contains(t, err.Error(), fmt.Sprintf("worker %d", w))
		}
	}
}

// Review finding: WithWorkerNames accepted two workers of one name, or
// a name that another worker keeps ("cpu1" for worker 0), so the trace
// had two threads and the chart two rows of that name, and nothing
// told the workers apart; and it kept the caller's map, so a change to
// it after New renamed the workers (a data race if made while a trace
// was written). New refuses the duplicates and copies the map.
func TestWorkerNamesDistinct(t *testing.T) {
	ctx := testCtx(t)
	for _, tc := range []struct {
		names map[int]string
		want  []string
	}{
		{map[int]string{0: "a", 2: "a"}, []string{"workers 0 and 2", `"a"`}},
		{map[int]string{0: "cpu1"}, []string{"worker 0", `"cpu1"`, "worker 1"}},
	} {
		_, err := scheduler.New(ctx, scheduler.WithWorkers(3), scheduler.WithWorkerNames(tc.names))
		require.ErrorIs(t, err, scheduler.ErrBadOption, "%v", tc.names)
		for _, w := range tc.want {
			assert.Contains(t, err.Error(), w, "%v", tc.names)
		}
	}
	// Swapping two default names is fine: each worker has its own.
	names := map[int]string{0: "cpu1", 1: "cpu0"}
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithWorkerNames(names))
	require.NoError(t, err)
	defer s.Close()
	names[0] = "changed"
	assert.Equal(t, "cpu1", s.WorkerName(0), "the caller's map changed after New renamed the worker")
	assert.Equal(t, "cpu0", s.WorkerName(1))
}
