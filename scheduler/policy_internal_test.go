package scheduler

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEarliestFinish(t *testing.T) {
	cases := []struct {
		name  string
		cands []heftCand
		best  int
		fin   float64
	}{
		{"none", nil, -1, 0},
		{"fastest idle worker", []heftCand{{0, 0, 10}, {0, 0, 5}}, 1, 5},
		{"busy fast worker loses", []heftCand{{0, 0, 10}, {8, 0, 5}}, 0, 10},
		{"transfer counts", []heftCand{{0, 6, 5}, {0, 0, 10}}, 1, 10},
		{"ties go to the lowest index", []heftCand{{1, 1, 1}, {0, 0, 3}, {3, 0, 0}}, 0, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, f := earliestFinish(c.cands)
			assert.Equal(t, c.best, b)
			assert.Equal(t, c.fin, f)
		})
	}
}

// cpuTask returns a CPU task of priority prio whose codelet has a model
// (a policy built with its own Estimate calibrates it or not; dmda gives a
// task without a model to its shared FIFO without asking).
func cpuTask(prio int) *Task {
	return &Task{Codelet: &Codelet{Name: "x", CPU: func(*Call) error { return nil }, Model: &PerfModel{Name: "x"}}, Priority: prio}
}

func workers(ids ...int) []WorkerInfo {
	var ws []WorkerInfo
	for _, id := range ids {
		ws = append(ws, WorkerInfo{ID: id, Kind: CPUWorker})
	}
	return ws
}

// Every policy keeps each pushed task exactly once across pops and
// worker removals, and keeps tasks pushed while it has no workers until
// workers are added.
func TestPolicyAddRemoveKeepsTasks(t *testing.T) {
	cfg := PolicyConfig{
		Seed:     1,
		Estimate: func(*Task, WorkerKind) (float64, bool) { return 0, false },
		Now:      func() int64 { return 0 },
	}
	for name, f := range policyFactories() {
		t.Run(name, func(t *testing.T) {
			p := f(cfg)
			seen := map[*Task]int{}
			var all []*Task
			push := func(n int) {
				for i := 0; i < n; i++ {
					tk := cpuTask(i % 3)
					all = append(all, tk)
					p.Push(tk, -1)
				}
			}
			// No workers yet: tasks wait.
			push(5)
			p.AddWorkers(workers(0, 1, 2)...)
			push(30)
			// Pop a few, then remove worker 1 and re-push what it held.
			for i := 0; i < 4; i++ {
				if tk := p.Pop(i % 3); tk != nil {
					seen[tk]++
				}
			}
			for _, tk := range p.RemoveWorkers(1) {
				p.Push(tk, -1)
			}
			assert.Nil(t, p.Pop(1), "a removed worker gets nothing")
			push(10)
			for _, tk := range p.RemoveWorkers(0, 2) {
				p.Push(tk, -1)
			}
			push(3)
			p.AddWorkers(workers(3)...)
			for {
				tk := p.Pop(3)
				if tk == nil {
					break
				}
				seen[tk]++
			}
			require.Len(t, seen, len(all))
			for _, tk := range all {
				require.Equal(t, 1, seen[tk])
			}
		})
	}
}

// TestTransferCostOfTaskThatCannotFit: the transfer cost a policy weighs
// for a device whose memory cannot hold the task's data is +Inf, so that
// dmda neither chooses the device nor prefetches to it (it did both, and
// the device's worker sent the task back to the CPU); data that fit cost
// a finite time.
func TestTransferCostOfTaskThatCannotFit(t *testing.T) {
	s, err := New(context.Background(), WithWorkers(1), WithSimDevices(SimDevice{Memory: 64 << 10}), WithPerfModelDir(""))
	require.NoError(t, err)
	defer s.Close()
	big, err := s.RegisterVector(make([]float64, 12<<10)) // 96 KiB
	require.NoError(t, err)
	small, err := s.RegisterVector(make([]float64, 1<<10)) // 8 KiB
	require.NoError(t, err)
	dev := -1
	for _, w := range s.Workers() {
		if w.Kind == SimWorker {
			dev = w.ID
		}
	}
	require.GreaterOrEqual(t, dev, 0)
	cl := &Codelet{Name: "x", CPU: func(*Call) error { return nil }}
	assert.True(t, math.IsInf(s.transferCost(&Task{Codelet: cl, Access: []Access{{big, ModeR}}}, dev), 1))
	cost := s.transferCost(&Task{Codelet: cl, Access: []Access{{small, ModeR}, {small, ModeRW}}}, dev)
	assert.False(t, math.IsInf(cost, 0))
	assert.Positive(t, cost)
}

// TestPushLocalFindsTheWorkerThatCanRun: under the local push rule (ws,
// lws) a task pushed from outside the workers goes round-robin to a
// member that can run it, however many pushes advance the turn at the
// same time. A task only the CPU worker of a CPU and a GPU worker can
// run (one sent back from a full GPU) was left an orphan - kept for
// workers yet to come, so never run - when concurrent pushes moved the
// turn between the two members' checks.
func TestPushLocalFindsTheWorkerThatCanRun(t *testing.T) {
	for _, name := range []string{"ws", "lws"} {
		t.Run(name, func(t *testing.T) {
			p := policyFactories()[name](PolicyConfig{Seed: 1}).(*queues)
			p.AddWorkers(WorkerInfo{ID: 0, Kind: CPUWorker}, WorkerInfo{ID: 1, Kind: CUDAWorker})
			var orphans atomic.Int64
			p.orphanHook = func() { orphans.Add(1) }
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range 2 { // other pushers taking turns
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
							p.rr.Add(1)
						}
					}
				})
			}
			task := cpuTask(0)
			for i := 0; i < 200000 && orphans.Load() == 0; i++ {
				p.Push(task, AnyWorker)
				if p.Pop(0) != task {
					t.Fatalf("push %d: the task is not in the CPU worker's queue (%d orphans)", i, orphans.Load())
				}
			}
			close(stop)
			wg.Wait()
			assert.Zero(t, orphans.Load(), "tasks left orphans beside a worker that can run them")
		})
	}
}
