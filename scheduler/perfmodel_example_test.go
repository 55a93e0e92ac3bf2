package scheduler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pzgo/pz/scheduler"
)

// The dmda policy places a task by its codelet's history model; the time
// it predicted is the task's Predicted. Here the model comes from a file
// of an earlier run (see docs/scheduler.md for its fields): ten
// measurements of 2 ms on a CPU worker for tasks of this footprint.
func ExampleTask_Predicted() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "perfmodels")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPolicy("dmda"),
		scheduler.WithPerfModelDir(dir), scheduler.WithGetenv(func(string) string { return "" }))
	if err != nil {
		panic(err)
	}
	defer s.Close()

	v, _ := s.RegisterVector(make([]float64, 1024))
	cl := &scheduler.Codelet{Name: "scale", Model: scheduler.HistoryModel("scale"),
		CPU: func(*scheduler.Call) error { return nil }}
	task := scheduler.NewTask(cl, scheduler.RW(v))

	host, _ := os.Hostname()
	model, _ := json.Marshal(map[string]any{"model": "scale", "host": host, "entries": []map[string]any{{
		"footprint": task.Footprint(), "kind": "cpu", "size": 1024 * 8,
		"n": 10, "mean_ns": 2e6, "stddev_ns": 0,
	}}})
	if err := os.WriteFile(filepath.Join(dir, "scale."+host+".json"), model, 0o644); err != nil {
		panic(err)
	}

	ns, ok := s.ModelEstimate(cl, scheduler.CPUWorker, scheduler.RW(v))
	fmt.Println("model:", ns, "ns", ok)
	if err := s.SubmitTask(ctx, task); err != nil {
		panic(err)
	}
	if err := task.Wait(ctx); err != nil {
		panic(err)
	}
	fmt.Println(task.Predicted())
	// Output:
	// model: 2e+06 ns true
	// 2ms true
}
