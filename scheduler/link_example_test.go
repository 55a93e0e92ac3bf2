package scheduler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pzgo/pz/scheduler"
)

// gbLink is a WorkerLink of 1 ms per task plus 1 GB/s.
type gbLink struct{}

func (gbLink) Cost(in, out int64) float64 {
	return float64(time.Millisecond) + float64(in+out) // 1 byte per ns
}

// Worker 1 stands for a core elsewhere (as scheduler/dist's master/worker
// mode makes them), reached over a link of 1 ms per task and 1 GB/s; here
// its tasks run in place. The dmda policy adds the link's cost to a
// task's predicted finish on that worker: the codelet's model (written
// beforehand, as an earlier run would have) says a task on a 1 MiB
// vector computes for 20 µs, a task on 8 numbers for 20 ms. The eight
// transfer-heavy tasks all stay on the local worker, whose whole queue
// (160 µs) is shorter than one task's trip over the link (3 ms); the
// four compute-heavy ones are shared, the link adding 1 ms to the remote
// worker's tasks (local 20, remote 21, local 40, remote 42 ms). Without
// the link, dmda would share the first eight as well. The tasks of each
// round wait until all of them are placed, so that none ends meanwhile.
func ExampleWithWorkerLinks() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "perfmodels")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPolicy("dmda"),
		scheduler.WithWorkerLinks(map[int]scheduler.WorkerLink{1: gbLink{}}),
		scheduler.WithPerfModelDir(dir), scheduler.WithGetenv(func(string) string { return "" }))
	if err != nil {
		panic(err)
	}
	defer s.Close()

	var gate chan struct{}
	var ran [2]int // each worker counts its own tasks
	cl := &scheduler.Codelet{Name: "step", Model: scheduler.HistoryModel("step"), CPU: func(c *scheduler.Call) error {
		<-gate
		ran[c.Worker]++
		return nil
	}}
	big, _ := s.RegisterVector(make([]float64, 1<<17))
	small, _ := s.RegisterVector(make([]float64, 8))
	host, _ := os.Hostname()
	model, _ := json.Marshal(map[string]any{"model": "step", "host": host, "entries": []map[string]any{
		{"footprint": scheduler.NewTask(cl, scheduler.RW(big)).Footprint(), "kind": "cpu", "n": 1000, "mean_ns": 20e3, "stddev_ns": 0},
		{"footprint": scheduler.NewTask(cl, scheduler.RW(small)).Footprint(), "kind": "cpu", "n": 1000, "mean_ns": 20e6, "stddev_ns": 0},
	}})
	if err := os.WriteFile(filepath.Join(dir, "step."+host+".json"), model, 0o644); err != nil {
		panic(err)
	}

	round := func(name string, tasks, elems int) {
		gate, ran = make(chan struct{}), [2]int{}
		b := s.NewBatch()
		for range tasks {
			v, _ := s.RegisterVector(make([]float64, elems))
			if err := b.Submit(ctx, cl, scheduler.RW(v)); err != nil {
				panic(err)
			}
		}
		b.Flush()
		close(gate)
		if err := s.WaitAll(ctx); err != nil {
			panic(err)
		}
		fmt.Printf("%s: local %d, remote %d\n", name, ran[0], ran[1])
	}
	round("transfer-heavy", 8, 1<<17)
	round("compute-heavy", 4, 8)
	// Output:
	// transfer-heavy: local 8, remote 0
	// compute-heavy: local 2, remote 2
}
