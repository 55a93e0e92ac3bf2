package runtimeview_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// traceTasks counts the tasks named name in the Chrome trace at path, by
// process (rank).
func traceTasks(t *testing.T, path, name string) map[int]int {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var tr struct {
		TraceEvents []struct {
			Name string `json:"name"`
			Ph   string `json:"ph"`
			Pid  int    `json:"pid"`
		} `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(raw, &tr), "%s is not a Chrome trace", path)
	by := map[int]int{}
	for _, e := range tr.TraceEvents {
		if e.Ph == "X" && e.Name == name {
			by[e.Pid]++
		}
	}
	return by
}

// traceGraph runs tasks tasks named "work" on the ranks in turn, each
// reading the handle of the rank before (so that data move), and waits.
func traceGraph(ctx context.Context, rt *runtimeview.RuntimeView, tasks int, fail func(i int) error) error {
	d, err := rt.Scheduler(ctx)
	if err != nil {
		return err
	}
	n := rt.Size()
	hs := make([]*dist.Handle, n)
	for r := range n {
		var data []int64
		if r == rt.Rank() {
			data = []int64{0}
		}
		if hs[r], err = dist.Register(d, r, data, 1, 1); err != nil {
			return err
		}
	}
	for i := range tasks {
		r := i % n
		work := &scheduler.Codelet{Name: "work", CPU: func(*scheduler.Call) error { return fail(i) }}
		acc := []dist.Arg{dist.RW(hs[r])}
		if n > 1 {
			acc = append(acc, dist.R(hs[(r+n-1)%n]))
		}
		if err := d.Submit(ctx, work, acc...); err != nil {
			return err
		}
	}
	return d.WaitAll(ctx)
}

func traceEnv(path string) runtimeview.Option {
	return runtimeview.WithGetenv(func(k string) string {
		if k == "PZ_TRACE" {
			return path
		}
		return ""
	})
}

// With PZ_TRACE on several ranks, Close writes one trace of every rank's
// tasks (not each rank's over the others'), and its Gantt chart beside
// it; no rank writes one of its own.
func TestSchedulerTraceMerged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	path := filepath.Join(dir, "x.json")
	const n, tasks = 3, 96
	err := runtimeview.RunLocal(ctx, n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		return traceGraph(ctx, rt, tasks, func(int) error { return nil })
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), quietLogs, traceEnv(path))
	require.NoError(t, err)
	by := traceTasks(t, path, "work")
	assert.Equal(t, map[int]int{0: tasks / n, 1: tasks / n, 2: tasks / n}, by, "every rank's tasks, by rank")
	assert.FileExists(t, filepath.Join(dir, "x.svg"))
	for r := range n {
		assert.NoFileExists(t, dist.RankTracePath(path, r))
	}
}

// When the graph did not complete on every rank, Close does not wait for
// a merge that some rank will not join: each rank writes its own trace
// (x.rankR.json and .svg), and no rank's trace replaces another's.
func TestSchedulerTraceFailedRank(t *testing.T) {
	for _, how := range []string{"task fails", "rank fails after the graph"} {
		t.Run(how, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			dir := t.TempDir()
			path := filepath.Join(dir, "x.json")
			const n, tasks = 3, 30
			boom := errors.New("boom")
			err := runtimeview.RunLocal(ctx, n, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				err := traceGraph(ctx, rt, tasks, func(i int) error {
					if how == "task fails" && i == tasks-2 { // on rank 1, the last of its tasks
						return boom
					}
					return nil
				})
				if err != nil {
					return err
				}
				if how == "rank fails after the graph" && rt.Rank() == 1 {
					return boom
				}
				return nil
			}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), quietLogs, traceEnv(path))
			require.ErrorContains(t, err, "boom")
			assert.NoFileExists(t, path, "no merged trace")
			total := 0
			for r := range n {
				own := dist.RankTracePath(path, r)
				// The local scheduler's trace: one process, the rank's.
				mine := traceTasks(t, own, "work")[0]
				if how == "rank fails after the graph" {
					assert.Equal(t, tasks/n, mine, "rank %d's file holds its own tasks", r)
				}
				total += mine
				assert.FileExists(t, filepath.Join(dir, fmt.Sprintf("x.rank%d.svg", r)))
			}
			if how == "rank fails after the graph" {
				assert.Equal(t, tasks, total, "every task, in its rank's file")
			}
		})
	}
}

// On one rank PZ_TRACE is the local scheduler's, as without runtimeview.
func TestSchedulerTraceOneRank(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	path := filepath.Join(dir, "x.json")
	err := runtimeview.RunLocal(ctx, 1, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		return traceGraph(ctx, rt, 10, func(int) error { return nil })
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), quietLogs, traceEnv(path))
	require.NoError(t, err)
	// The local scheduler's trace names its process pz, not "rank 0".
	total := 0
	for _, c := range traceTasks(t, path, "work") {
		total += c
	}
	assert.Equal(t, 10, total)
	assert.FileExists(t, filepath.Join(dir, "x.svg"))
	assert.NoFileExists(t, dist.RankTracePath(path, 0))
}

// A merged trace whose name ends in .svg is refused when the scheduler
// is made, as the local scheduler refuses PZ_TRACE, not after the run.
func TestSchedulerTraceSVGRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "x.svg")
	err := runtimeview.RunLocal(ctx, 2, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		_, err := rt.Scheduler(ctx)
		return err
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()), quietLogs, traceEnv(path))
	require.ErrorIs(t, err, scheduler.ErrBadOption)
	assert.ErrorContains(t, err, "PZ_TRACE")
}
