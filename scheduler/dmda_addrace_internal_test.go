package scheduler

import (
	"sync"
	"testing"
)

// TestDMDAPushWhileAddingWorkers: dmda published a new worker (its queue
// set) before growing its per-worker loads, so a Push that saw the new
// set indexed past the loads and panicked holding dmda's lock; the
// scheduler's Close then waited for ever on workers blocked on that
// lock (CI: TestPartitionRandomGraphs seed 42 hung for 6 minutes).
func TestDMDAPushWhileAddingWorkers(t *testing.T) {
	cfg := PolicyConfig{
		Seed:     1,
		Estimate: func(*Task, WorkerKind) (float64, bool) { return 1, true }, // calibrated: the path that reads the loads
		Now:      func() int64 { return 0 },
	}
	for round := 0; round < 300; round++ {
		p := newDMDA(cfg)
		p.AddWorkers(workers(0)...)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				p.Push(cpuTask(i%3), -1)
			}
		}()
		for id := 1; id < 32; id++ {
			p.AddWorkers(workers(id)...)
		}
		wg.Wait()
	}
}
