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
