package scheduler

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPolicyMembershipHammer drives every policy as the scheduler does
// while workers join and leave: one goroutine per worker pops its tasks,
// pushes the tasks they release (from its own id) and, at random, leaves
// the policy (re-pushing what RemoveWorkers hands back) or joins it again
// - each worker changes its own membership only, at a safe point, as the
// contract says - while a goroutine outside the workers pushes more. At
// the end every worker joins and pops until empty: each task must come
// out exactly once. dmda runs calibrated (the model's loads), uncalibrated
// (the shared FIFO) and half calibrated (pushCalibrating); the workers
// are CPU workers and a simulated device, and some tasks run on CPUs
// only, so that tasks wait as orphans while no member can run them. A
// policy that indexes per-worker state for a worker it has not grown it
// for panics here (TestDMDAPushWhileAddingWorkers), and one that loses a
// task fails the count.
func TestPolicyMembershipHammer(t *testing.T) {
	type variant struct {
		name string
		est  func(*Task, WorkerKind) (float64, bool)
	}
	variants := []variant{}
	for _, n := range Policies() {
		if n == "dmda" {
			continue
		}
		variants = append(variants, variant{name: n})
	}
	variants = append(variants,
		variant{"dmda/calibrated", func(*Task, WorkerKind) (float64, bool) { return 1000, true }},
		variant{"dmda/uncalibrated", func(*Task, WorkerKind) (float64, bool) { return 0, false }},
		variant{"dmda/cpu-calibrated", func(_ *Task, k WorkerKind) (float64, bool) { return 1000, k == CPUWorker }},
	)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			for round := 0; round < 20; round++ {
				hammerPolicy(t, v.name, v.est, uint64(round))
				if t.Failed() {
					return
				}
			}
		})
	}
}

func hammerPolicy(t *testing.T, name string, est func(*Task, WorkerKind) (float64, bool), seed uint64) {
	t.Helper()
	base := name
	if i := len("dmda"); len(name) > i && name[:i] == "dmda" {
		base = "dmda"
	}
	if est == nil {
		est = func(*Task, WorkerKind) (float64, bool) { return 0, false }
	}
	var clock atomic.Int64
	p := policyFactories()[base](PolicyConfig{
		Seed:     seed + 1,
		Estimate: est,
		Now:      func() int64 { return clock.Add(1) },
	})
	infos := []WorkerInfo{{ID: 0, Kind: CPUWorker}, {ID: 1, Kind: CPUWorker}, {ID: 2, Kind: CPUWorker}, {ID: 3, Kind: SimWorker}}
	const pushes = 400
	var (
		mu     sync.Mutex
		seen   = map[*Task]int{}
		pushed atomic.Int64
		popped atomic.Int64
	)
	newTask := func(i int) *Task {
		tk := cpuTask(i % 4)
		tk.cpuOnly = i%3 == 0
		pushed.Add(1)
		return tk
	}
	took := func(tk *Task) {
		mu.Lock()
		seen[tk]++
		mu.Unlock()
		popped.Add(1)
	}
	// Worker 0 starts as a member; the others join on their own.
	p.AddWorkers(infos[0])
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range infos {
		member := w.ID == 0
		rng := rand.New(rand.NewPCG(seed, uint64(w.ID)))
		wg.Go(func() {
			released := 0
			for {
				select {
				case <-done:
					if !member {
						p.AddWorkers(w)
					}
					return
				default:
				}
				if rng.IntN(8) == 0 { // a safe point: leave or join
					if member {
						for _, tk := range p.RemoveWorkers(w.ID) {
							p.Push(tk, w.ID)
						}
					} else {
						p.AddWorkers(w)
					}
					member = !member
					continue
				}
				if tk := p.Pop(w.ID); tk != nil {
					if !member {
						panic(fmt.Sprintf("%s: worker %d popped a task while not a member", name, w.ID))
					}
					took(tk)
					if released < pushes/8 && rng.IntN(2) == 0 {
						released++
						p.Push(newTask(released), w.ID)
					}
				}
			}
		})
	}
	for i := 0; i < pushes; i++ {
		p.Push(newTask(i), -1)
	}
	close(done)
	wg.Wait()
	// Every worker is a member again: pop what is left.
	deadline := time.Now().Add(10 * time.Second)
	for popped.Load() < pushed.Load() && time.Now().Before(deadline) {
		got := false
		for _, w := range infos {
			if tk := p.Pop(w.ID); tk != nil {
				took(tk)
				got = true
			}
		}
		if !got {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if int64(len(seen)) != pushed.Load() {
		t.Errorf("%s seed %d: %d tasks pushed, %d distinct popped (%d pops)", name, seed, pushed.Load(), len(seen), popped.Load())
	}
	for tk, n := range seen {
		if n != 1 {
			t.Errorf("%s seed %d: a task (priority %d) popped %d times", name, seed, tk.Priority, n)
		}
	}
}
