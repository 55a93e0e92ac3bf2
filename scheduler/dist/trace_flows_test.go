package dist_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// The merged trace draws a transfer as flow arrows from the task that
// produced the data on the sending rank, through the send and the
// receive, to the task that used it on the receiving rank, each end of
// an arrow inside its slice. Before, the only arrow went from the send's
// slice to the receive's, both on transfer threads: in Perfetto nothing
// led from a task to the transfers it caused or from a receive to the
// tasks that waited for it. Here "produce" writes rank 0's vector, which
// "consume" reads on rank 1.
func TestMergedTraceFlowsFromTaskToTask(t *testing.T) {
	produce := &scheduler.Codelet{Name: "produce", CPU: func(c *scheduler.Call) error {
		v := scheduler.VectorOf[int64](c, 0)
		for i := range v {
			v[i] = int64(i)
		}
		return nil
	}}
	consume := &scheduler.Codelet{Name: "consume", CPU: func(c *scheduler.Call) error {
		copy(scheduler.VectorOf[int64](c, 1), scheduler.VectorOf[int64](c, 0))
		return nil
	}}
	path := mergedTraceOf(t, "flows", func(ctx context.Context, d *dist.Scheduler, hs []*dist.Handle) error {
		if err := d.Submit(ctx, produce, dist.W(hs[0])); err != nil {
			return err
		}
		return d.Submit(ctx, consume, dist.R(hs[0]), dist.W(hs[1]))
	})
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var tr struct {
		TraceEvents []struct {
			Name string  `json:"name"`
			Ph   string  `json:"ph"`
			Ts   float64 `json:"ts"`
			Dur  float64 `json:"dur"`
			Pid  int     `json:"pid"`
			Tid  int     `json:"tid"`
			ID   uint64  `json:"id"`
		} `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(raw, &tr))
	// The slice each flow event lies in, by its name's first word.
	in := func(ph string, id uint64) string {
		for _, f := range tr.TraceEvents {
			if f.Ph != ph || f.ID != id {
				continue
			}
			for _, s := range tr.TraceEvents {
				if s.Ph == "X" && s.Pid == f.Pid && s.Tid == f.Tid && s.Ts < f.Ts && f.Ts < s.Ts+s.Dur {
					return strings.Fields(s.Name)[0]
				}
			}
			return "nothing"
		}
		return "no event"
	}
	arrows := map[string]bool{}
	for _, e := range tr.TraceEvents {
		if e.Ph == "s" {
			arrows[in("s", e.ID)+" -> "+in("f", e.ID)] = true
		}
	}
	for _, want := range []string{"produce -> send", "send -> recv", "recv -> consume"} {
		require.True(t, arrows[want], "no flow arrow %s (each end inside its slice); the trace's arrows: %v", want, arrows)
	}
}

// mergedTraceOf runs submit on 2 in-process ranks of one worker each,
// with statistics on, given a vector of 4 int64 owned by each rank (hs[r]
// on rank r); then it waits for the tasks and writes the merged trace
// files, whose JSON path (name.json in the test's temporary directory,
// name.svg beside it) it returns.
func mergedTraceOf(t *testing.T, name string, submit func(ctx context.Context, d *dist.Scheduler, hs []*dist.Handle) error) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".json")
	err := runRanksWith(t, 2, []scheduler.Option{scheduler.WithWorkers(1), scheduler.WithStats(true)}, func(ctx context.Context, d *dist.Scheduler) error {
		hs, err := onePerRank[int64](d, 4)
		if err != nil {
			return err
		}
		if err := submit(ctx, d, hs); err != nil {
			return err
		}
		if err := d.WaitAll(ctx); err != nil {
			return err
		}
		return d.WriteTraceFiles(ctx, path, 0)
	})
	require.NoError(t, err)
	return path
}
