package dist_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// The merged Gantt chart's tooltips name a task by its number in its
// rank's trace (the Perfetto trace's args.task) and its rank: they
// printed the chart's internal ID instead, 2^61 + number × ranks + rank
// ("cholesky_fill #2305843009213693955" in pzrun -n 2 cholesky -trace),
// a number found nowhere else, and 2^62 + n or 2^63 + n for transfers
// and copies.
func TestMergedGanttTooltipsNameTaskAndRank(t *testing.T) {
	work := &scheduler.Codelet{Name: "work", CPU: func(*scheduler.Call) error { return nil }}
	path := mergedTraceOf(t, "tips", func(ctx context.Context, d *dist.Scheduler, hs []*dist.Handle) error {
		// Each rank writes its own vector, then rank 0 reads rank 1's:
		// tasks on both ranks and one transfer.
		for _, h := range hs {
			if err := d.Submit(ctx, work, dist.RW(h)); err != nil {
				return err
			}
		}
		return d.Submit(ctx, work, dist.RW(hs[0]), dist.R(hs[1]))
	})
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var trace struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Cat  string         `json:"cat"`
			Pid  int            `json:"pid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(raw, &trace))
	want := map[string]bool{}
	for _, e := range trace.TraceEvents {
		if e.Cat == "task" {
			want[fmt.Sprintf("work #%v on rank %d", e.Args["task"], e.Pid)] = true
		}
	}
	require.Len(t, want, 3, "the trace's task slices: %s", raw)

	svg, err := os.ReadFile(filepath.Join(filepath.Dir(path), "tips.svg"))
	require.NoError(t, err)
	got := map[string]bool{}
	for _, m := range regexp.MustCompile(`<title>(work [^,]*),`).FindAllSubmatch(svg, -1) {
		got[string(m[1])] = true
	}
	require.Equal(t, want, got, "the chart's task tooltips name each task as the trace does")
	require.Regexp(t, `<title>send on rank 1, `, string(svg), "a transfer's tooltip names its rank")
	require.NotRegexp(t, `#\d{10,}`, string(svg), "no tooltip shows a chart-internal ID")
}
