package dist_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// mergedTraceFile is the part of a merged trace the tests read.
type mergedTraceFile struct {
	TraceEvents []struct {
		Name string         `json:"name"`
		Cat  string         `json:"cat"`
		Ph   string         `json:"ph"`
		Ts   float64        `json:"ts"`
		Dur  float64        `json:"dur"`
		Pid  int            `json:"pid"`
		Tid  int            `json:"tid"`
		ID   uint64         `json:"id"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
	Metadata struct {
		ClockRoot    int `json:"clock_root"`
		ClockOffsets []struct {
			Rank          int   `json:"rank"`
			OffsetNs      int64 `json:"offset_ns"`
			UncertaintyNs int64 `json:"uncertainty_ns"`
		} `json:"clock_offsets"`
		ClampedReceives *int `json:"clamped_receives"`
	} `json:"metadata"`
}

func readMergedTrace(t *testing.T, path string) mergedTraceFile {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var tr mergedTraceFile
	require.NoError(t, json.Unmarshal(raw, &tr))
	return tr
}

// A rank's clock that is off (another host's, without tight NTP) must
// not misplace its events in the merged trace. Before, each rank's
// events were placed by its own clock: a rank 50 ms ahead had its tasks
// 50 ms late, a receive could end before its send started, and Perfetto
// dropped the transfer's arrow. Here ranks 1 and 2 have clocks 50 ms
// ahead and 30 ms behind rank 0's (the root's); a chain of tasks moves a
// vector 0 -> 1 -> 2 -> 0. The merged trace must place every rank's tasks
// within the clock estimate's uncertainty of where they ran, every
// receive must end after its send started, and every flow arrow must end
// after it starts, each end inside a slice.
func TestMergedTraceAlignsSkewedClocks(t *testing.T) {
	const n = 3
	skews := [n]time.Duration{0, 50 * time.Millisecond, -30 * time.Millisecond}
	first := &scheduler.Codelet{Name: "first", CPU: func(c *scheduler.Call) error {
		clear(scheduler.VectorOf[int64](c, 0))
		return nil
	}}
	step := &scheduler.Codelet{Name: "step", CPU: func(c *scheduler.Call) error {
		out := scheduler.VectorOf[int64](c, 1)
		for i, v := range scheduler.VectorOf[int64](c, 0) {
			out[i] = v + 1
		}
		return nil
	}}
	path := filepath.Join(t.TempDir(), "skew.json")
	var epochs [n]time.Time
	var tasks [n]map[uint64]scheduler.TracedTask
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	err := local.Run(ctx, n, func(ctx context.Context, c comm.Comm) error {
		r := c.Rank()
		ls, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithStats(true))
		if err != nil {
			return err
		}
		defer ls.Close()
		d, err := dist.New(ctx, c, ls, dist.WithTraceClockSkew(skews[r]))
		if err != nil {
			return err
		}
		defer d.Close()
		hs, err := onePerRank[int64](d, vecLen)
		if err != nil {
			return err
		}
		if err := d.Submit(ctx, first, dist.W(hs[0])); err != nil {
			return err
		}
		for i := 1; i <= n; i++ {
			if err := d.Submit(ctx, step, dist.R(hs[i-1]), dist.RW(hs[i%n])); err != nil {
				return err
			}
		}
		if err := d.WaitAll(ctx); err != nil {
			return err
		}
		if err := d.WriteTraceFiles(ctx, path, 0); err != nil {
			return err
		}
		epochs[r] = ls.Epoch()
		tasks[r] = map[uint64]scheduler.TracedTask{}
		for _, tt := range ls.TracedTasks() {
			tasks[r][tt.ID] = tt
		}
		return nil
	})
	require.NoError(t, err)
	tr := readMergedTrace(t, path)

	// The estimates: each rank's skew, within its uncertainty.
	require.Len(t, tr.Metadata.ClockOffsets, n, "the trace's metadata has no clock offset of every rank")
	require.NotNil(t, tr.Metadata.ClampedReceives, "the trace's metadata does not say how many receives were clamped")
	for r, c := range tr.Metadata.ClockOffsets {
		require.Equal(t, r, c.Rank)
		assert.LessOrEqual(t, math.Abs(float64(c.OffsetNs-int64(skews[r]))), float64(c.UncertaintyNs),
			"rank %d's clock estimated %v ahead ± %v; it is %v ahead", r, time.Duration(c.OffsetNs), time.Duration(c.UncertaintyNs), skews[r])
	}

	// Where each rank's tasks were placed: the trace's time of the
	// rank's epoch, the same for all its tasks.
	placed := [n]float64{} // ns
	seen := [n]bool{}
	for _, e := range tr.TraceEvents {
		if e.Ph != "X" || e.Cat != "task" {
			continue
		}
		id, ok := e.Args["task"].(float64)
		require.True(t, ok, "task slice %q of rank %d has no args.task", e.Name, e.Pid)
		tt, ok := tasks[e.Pid][uint64(id)]
		require.True(t, ok, "rank %d ran no task %v", e.Pid, id)
		at := e.Ts*1e3 - float64(tt.Start)
		if !seen[e.Pid] {
			placed[e.Pid], seen[e.Pid] = at, true
		}
		require.InDelta(t, placed[e.Pid], at, 2, "rank %d's tasks are not shifted alike", e.Pid)
	}
	for r := 1; r < n; r++ {
		require.True(t, seen[r], "rank %d has no task slice", r)
		want := float64(epochs[r].Sub(epochs[0])) // monotonic: where they ran
		got := placed[r] - placed[0]
		u := float64(tr.Metadata.ClockOffsets[r].UncertaintyNs)
		assert.LessOrEqual(t, math.Abs(got-want), u+2,
			"rank %d's tasks are placed %v from where they ran (rank %d's clock %v ahead; uncertainty %v)", r, time.Duration(got-want), r, skews[r], time.Duration(u))
	}

	// Causality: every receive ends after its send started.
	type span struct{ start, end float64 }
	sends, recvs := map[float64]span{}, map[float64]span{}
	for _, e := range tr.TraceEvents {
		if e.Ph != "X" || e.Cat != "transfer" {
			continue
		}
		id := e.Args["transfer"].(float64)
		if strings.HasPrefix(e.Name, "send") {
			sends[id] = span{e.Ts, e.Ts + e.Dur}
		} else {
			recvs[id] = span{e.Ts, e.Ts + e.Dur}
		}
	}
	require.Len(t, recvs, n, "one transfer per step to another rank")
	for id, rv := range recvs {
		s, ok := sends[id]
		require.True(t, ok, "transfer %v has no send", id)
		assert.GreaterOrEqual(t, rv.end, s.start, "transfer %v's receive ends (%.3f µs) before its send starts (%.3f µs)", id, rv.end, s.start)
	}
	// Every flow arrow ends after it starts, each end strictly inside
	// a slice of its thread (where Perfetto binds it).
	flows := map[uint64][2]float64{}
	for _, f := range tr.TraceEvents {
		if f.Ph != "s" && f.Ph != "f" {
			continue
		}
		in := false
		for _, s := range tr.TraceEvents {
			if s.Ph == "X" && s.Pid == f.Pid && s.Tid == f.Tid && s.Ts < f.Ts && f.Ts < s.Ts+s.Dur {
				in = true
				break
			}
		}
		assert.True(t, in, "flow %s %d's %s end (rank %d, %.3f µs) lies in no slice", f.Name, f.ID, f.Ph, f.Pid, f.Ts)
		ends := flows[f.ID]
		if f.Ph == "s" {
			ends[0] = f.Ts
		} else {
			ends[1] = f.Ts
		}
		flows[f.ID] = ends
	}
	require.NotEmpty(t, flows)
	for id, ends := range flows {
		assert.GreaterOrEqual(t, ends[1], ends[0], "flow %d ends (%.3f µs) before it starts (%.3f µs)", id, ends[1], ends[0])
	}
}

// The merged trace's task slices carry what a one-rank trace's do: the
// tasks' dependencies (args.deps) and a failed task's error
// (args.error); its Gantt chart shows the failure. Before, a merged
// task slice had only args.task, so a failed distributed run's trace
// did not say which task failed, or why. Here "check" on rank 1 fails
// on the vector rank 0's "produce" wrote.
func TestMergedTraceShowsFailedTask(t *testing.T) {
	produce := &scheduler.Codelet{Name: "produce", CPU: func(c *scheduler.Call) error { return nil }}
	check := &scheduler.Codelet{Name: "check", CPU: func(c *scheduler.Call) error {
		return errors.New("tile 3 not positive definite")
	}}
	path := filepath.Join(t.TempDir(), "failed.json")
	err := runRanksWith(t, 2, []scheduler.Option{scheduler.WithWorkers(1), scheduler.WithStats(true)}, func(ctx context.Context, d *dist.Scheduler) error {
		hs, err := onePerRank[int64](d, 4)
		if err != nil {
			return err
		}
		if err := d.Submit(ctx, produce, dist.W(hs[0])); err != nil {
			return err
		}
		if err := d.Submit(ctx, check, dist.R(hs[0]), dist.W(hs[1])); err != nil {
			return err
		}
		if err := d.WaitAll(ctx); err == nil || !strings.Contains(err.Error(), "not positive definite") {
			return errors.Join(errors.New("WaitAll did not return the task's failure"), err)
		}
		return d.WriteTraceFiles(ctx, path, 0)
	})
	require.NoError(t, err)
	tr := readMergedTrace(t, path)
	found := false
	for _, e := range tr.TraceEvents {
		if e.Ph != "X" || e.Cat != "task" {
			continue
		}
		require.Contains(t, e.Args, "deps", "task slice %q of rank %d has no args.deps", e.Name, e.Pid)
		if e.Name != "check" {
			assert.NotContains(t, e.Args, "error", "task %q did not fail", e.Name)
			continue
		}
		found = true
		assert.Equal(t, 1, e.Pid)
		assert.Contains(t, e.Args["error"], "tile 3 not positive definite", "the failed task's slice has not its error")
		deps, _ := e.Args["deps"].([]any)
		assert.NotEmpty(t, deps, "the failed task depended on the receive of the vector it read")
	}
	require.True(t, found, "no slice of the failed task")
	svg, err := os.ReadFile(strings.TrimSuffix(path, ".json") + ".svg")
	require.NoError(t, err)
	assert.Contains(t, string(svg), "tile 3 not positive definite", "the Gantt chart does not show the failed task's error")
}
