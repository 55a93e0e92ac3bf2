package scheduler_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// bwLink is a WorkerLink of a fixed latency per task and bandwidth, in
// bytes per second, which counts what it was asked.
type bwLink struct {
	latency time.Duration
	bw      float64
}

func (l bwLink) Cost(in, out int64) float64 {
	return float64(l.latency) + float64(in+out)/l.bw*1e9
}

// writeModel writes the model file of model name in dir with one entry:
// tasks of footprint fp on CPU workers take mean, measured n times
// without deviation, so that dmda places them from the first.
func writeModel(t *testing.T, dir, name string, fp uint64, mean time.Duration) {
	t.Helper()
	host, err := os.Hostname()
	require.NoError(t, err)
	b, err := json.Marshal(map[string]any{
		"model": name, "host": host,
		"entries": []map[string]any{{"footprint": fp, "kind": "cpu", "n": 1000, "mean_ns": float64(mean), "stddev_ns": 0}},
	})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+"."+host+".json"), b, 0o644))
}

// TestDMDALinkedWorker: a linked worker (WithWorkerLinks), which stands
// for a core elsewhere that gets each task's data over its link, is
// priced by its link. Transfer-heavy short tasks (1 MiB read and written,
// 20 µs predicted, 2 ms of link at 1 GB/s) all stay on the local worker:
// the link costs more than the local worker's whole queue (0.8 ms).
// Tasks of 50 ms on 64 bytes (10 ms of link latency) go to both workers,
// alternately: local, linked (60 < 100 ms), local (100 < 120: the
// linked one's load counts its link's time as well as the task's),
// linked (120 < 150). Over a link of 30 ms, the linked worker takes the
// second task only (80 < 100), then is busy until 80 ms (local: 100 <
// 160, 150 < 160). The models are written beforehand (n = 1000, no
// deviation), so that every placement is the model's whatever the tasks
// measure; the tasks are pushed together (a batch) and the first ones
// wait for the last to be placed, so that no task ends meanwhile.
func TestDMDALinkedWorker(t *testing.T) {
	ctx := testCtx(t)
	for _, tc := range []struct {
		name      string
		elems     int
		mean      time.Duration
		link      bwLink
		tasks     int
		wantLinks int // tasks the linked worker runs
	}{
		{"transfer-heavy", 1 << 17, 20 * time.Microsecond, bwLink{latency: 10 * time.Microsecond, bw: 1e9}, 40, 0},
		{"compute-heavy", 8, 50 * time.Millisecond, bwLink{latency: 10 * time.Millisecond, bw: 1e9}, 4, 2},
		{"compute-heavy-slow-link", 8, 50 * time.Millisecond, bwLink{latency: 30 * time.Millisecond, bw: 1e9}, 4, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			model := "link-" + tc.name
			ran := make([]int, 2)
			placed := make(chan struct{})
			cl := &scheduler.Codelet{Name: model, Model: scheduler.HistoryModel(model), CPU: func(c *scheduler.Call) error {
				<-placed
				ran[c.Worker]++ // each worker its own count, read after WaitAll
				return nil
			}}
			s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPolicy("dmda"),
				scheduler.WithPerfModelDir(dir), scheduler.WithGetenv(func(string) string { return "" }),
				scheduler.WithWorkerLinks(map[int]scheduler.WorkerLink{1: tc.link}))
			require.NoError(t, err)
			defer s.Close()
			require.True(t, s.Workers()[1].Linked)
			require.False(t, s.Workers()[0].Linked)
			hs := make([]*scheduler.Handle, tc.tasks)
			for i := range hs {
				hs[i], err = s.RegisterVector(make([]float64, tc.elems))
				require.NoError(t, err)
			}
			writeModel(t, dir, model, scheduler.NewTask(cl, scheduler.RW(hs[0])).Footprint(), tc.mean)
			est, ok := s.ModelEstimate(cl, scheduler.CPUWorker, scheduler.RW(hs[0]))
			require.True(t, ok)
			require.Equal(t, float64(tc.mean), est)
			// The tasks are placed as they are submitted, in a batch so
			// that none ends before the last is placed.
			b := s.NewBatch()
			tasks := make([]*scheduler.Task, tc.tasks)
			for i, h := range hs {
				tasks[i] = scheduler.NewTask(cl, scheduler.RW(h))
				require.NoError(t, b.SubmitTask(ctx, tasks[i]))
			}
			b.Flush()
			close(placed)
			require.NoError(t, s.WaitAll(ctx))
			for i, task := range tasks {
				d, ok := task.Predicted()
				require.True(t, ok, "task %d placed by the model", i)
				assert.Equal(t, tc.mean, d, "task %d: the prediction is the compute time only", i)
			}
			assert.Equal(t, []int{tc.tasks - tc.wantLinks, tc.wantLinks}, ran, "tasks run by the local and the linked worker")
		})
	}
}

// ptrLink is a WorkerLink with a pointer receiver, whose Cost reads its
// fields: a nil *ptrLink panics when priced.
type ptrLink struct{ perByte float64 }

func (l *ptrLink) Cost(in, out int64) float64 { return float64(in+out) * l.perByte }

// funcLink is a WorkerLink of a func type.
type funcLink func(in, out int64) float64

func (f funcLink) Cost(in, out int64) float64 { return f(in, out) }

// TestWorkerLinksRefused: a link for a worker that is not a CPU worker,
// or a nil link (nil itself, or a nil pointer or func of a type that is a
// WorkerLink, which would panic when dmda prices a task), is refused by
// New, naming the worker; a worker of several bad ones is the lowest.
func TestWorkerLinksRefused(t *testing.T) {
	ctx := testCtx(t)
	for _, tc := range []struct {
		links map[int]scheduler.WorkerLink
		want  string
	}{
		{map[int]scheduler.WorkerLink{2: bwLink{bw: 1}}, "worker 2 is not a CPU worker"},
		{map[int]scheduler.WorkerLink{-1: bwLink{bw: 1}}, "worker -1 is not a CPU worker"},
		{map[int]scheduler.WorkerLink{0: nil}, "worker 0 has a nil link"},
		{map[int]scheduler.WorkerLink{0: &ptrLink{perByte: 1}, 1: (*ptrLink)(nil)}, "worker 1 has a nil *scheduler_test.ptrLink as its link"},
		{map[int]scheduler.WorkerLink{1: funcLink(nil)}, "worker 1 has a nil scheduler_test.funcLink as its link"},
		{map[int]scheduler.WorkerLink{1: (*ptrLink)(nil), 0: (*ptrLink)(nil)}, "worker 0 has a nil *scheduler_test.ptrLink"},
	} {
		_, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPolicy("dmda"), scheduler.WithPerfModelDir(""),
			scheduler.WithWorkerLinks(tc.links))
		require.ErrorIs(t, err, scheduler.ErrBadOption, "links %v", tc.links)
		assert.Contains(t, err.Error(), tc.want)
	}
}

// TestSetModelTime: the time an implementation reports (Call.SetModelTime)
// is what the codelet's model records, not the time the implementation
// took; without a report, its own time.
func TestSetModelTime(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPerfModelDir(""), scheduler.WithGetenv(func(string) string { return "" }))
	require.NoError(t, err)
	defer s.Close()
	h, err := s.RegisterVector(make([]float64, 8))
	require.NoError(t, err)
	reported := &scheduler.Codelet{Name: "reported", Model: scheduler.HistoryModel("reported"), CPU: func(c *scheduler.Call) error {
		c.SetModelTime(5 * time.Second)
		return nil
	}}
	own := &scheduler.Codelet{Name: "own", Model: scheduler.HistoryModel("own"), CPU: func(*scheduler.Call) error { return nil }}
	for range 12 {
		require.NoError(t, s.Submit(ctx, reported, scheduler.RW(h)))
		require.NoError(t, s.Submit(ctx, own, scheduler.RW(h)))
	}
	require.NoError(t, s.WaitAll(ctx))
	est, ok := s.ModelEstimate(reported, scheduler.CPUWorker, scheduler.RW(h))
	require.True(t, ok)
	assert.Equal(t, float64(5*time.Second), est)
	est, ok = s.ModelEstimate(own, scheduler.CPUWorker, scheduler.RW(h))
	require.True(t, ok)
	assert.Less(t, est, float64(time.Second), "the own codelet's time, not the other's report")
}
