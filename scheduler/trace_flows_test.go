package scheduler_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// Each dependency arrow of the trace starts inside its predecessor's
// slice and ends inside its successor's, a nanosecond from their ends.
// It started exactly at the predecessor's end and ended exactly at the
// successor's start: Perfetto binds a flow event to the slice open on its
// thread at that time, so a task starting on the same worker at the
// nanosecond its predecessor ended took the arrow, and readers that test
// 'inside' on the microsecond floats found it outside both.
func TestTraceDependencyArrowsInsideSlices(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2), scheduler.WithStats(true))
	h, err := s.RegisterVector(make([]int64, 8))
	require.NoError(t, err)
	step := &scheduler.Codelet{Name: "step", CPU: func(c *scheduler.Call) error {
		scheduler.VectorOf[int64](c, 0)[0]++
		return nil
	}}
	for range 5 {
		require.NoError(t, s.Submit(ctx, step, scheduler.RW(h)))
	}
	require.NoError(t, s.WaitAll(ctx))
	var buf bytes.Buffer
	require.NoError(t, s.WriteTrace(&buf))
	var tr struct {
		TraceEvents []struct {
			Ph  string  `json:"ph"`
			Cat string  `json:"cat"`
			Ts  float64 `json:"ts"`
			Dur float64 `json:"dur"`
			Tid int     `json:"tid"`
			ID  uint64  `json:"id"`
		} `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &tr))
	arrows := 0
	for _, f := range tr.TraceEvents {
		if f.Cat != "dep" {
			continue
		}
		arrows++
		inside := false
		for _, e := range tr.TraceEvents {
			if e.Ph == "X" && e.Cat == "task" && e.Tid == f.Tid && e.Ts < f.Ts && f.Ts < e.Ts+e.Dur {
				inside = true
			}
		}
		require.True(t, inside, "the %q event of arrow %d at %v µs is not inside a task's slice on worker %d", f.Ph, f.ID, f.Ts, f.Tid)
	}
	require.Equal(t, 2*4, arrows, "4 dependencies of a chain of 5 tasks, a start and an end each")
}
