package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOrphanPushRacingAddWorkers pushes a task into a per-worker-queue
// policy without members while, between the push finding no member and
// the task being kept as an orphan, a worker is added (the window of a
// submitter racing with the first worker joining a new context). The
// task must end up where the new worker pops it, and the push must name
// a worker to wake: the joined worker may already be asleep.
func TestOrphanPushRacingAddWorkers(t *testing.T) {
	cfg := PolicyConfig{Seed: 1, Estimate: func(*Task, WorkerKind) (float64, bool) { return 0, false },
		Now: func() int64 { return 0 }}
	for _, name := range []string{"random", "ws", "lws", "dmda"} {
		t.Run(name, func(t *testing.T) {
			f, err := lookupPolicy(name)
			require.NoError(t, err)
			p := f(cfg)
			var qs *queueSet
			switch p := p.(type) {
			case *queues:
				qs = &p.queueSet
			case *dmda:
				qs = &p.queueSet
			}
			require.NotNil(t, qs, "policy %s has no queueSet", name)
			calls := 0
			qs.orphanHook = func() {
				calls++
				if calls == 1 {
					p.AddWorkers(workers(0)...)
				}
			}
			task := cpuTask(0)
			hint := p.Push(task, -1)
			require.Equal(t, 1, calls, "the push did not find the policy empty")
			assert.NotEqual(t, NoWorker, hint, "a task queued for a joined worker must wake it")
			assert.Same(t, task, p.Pop(0), "the joined worker cannot pop the task")
			assert.Nil(t, p.Pop(0), "the task was queued twice")
		})
	}
}

// TestOrphanPushWakesJoinedWorkers is the scheduler-level form: a task
// submitted to an empty context races with the context's first workers
// joining, and those workers are asleep by the time the task is queued.
// Before the fix the task sat in a sleeping worker's queue and WaitAll
// (and Close) hung.
func TestOrphanPushWakesJoinedWorkers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, pol := range []string{"lws", "random", "dmda"} {
		t.Run(pol, func(t *testing.T) {
			s, err := New(ctx, WithWorkers(3), WithPolicy(pol), WithSpin(0), WithPerfModelDir(""), WithGetenv(func(string) string { return "" }))
			require.NoError(t, err)
			a, err := s.NewContext("a")
			require.NoError(t, err)
			var qs *queueSet
			switch p := a.policy.(type) {
			case *queues:
				qs = &p.queueSet
			case *dmda:
				qs = &p.queueSet
			}
			require.NotNil(t, qs)
			hooked := 0
			qs.orphanHook = func() {
				hooked++
				if hooked > 1 {
					return
				}
				// Workers 0 and 1 join a, find nothing and fall asleep
				// before the task is kept as an orphan.
				require.NoError(t, a.AddWorkers(0, 1))
				for deadline := time.Now().Add(5 * time.Second); ; {
					set := qs.set.Load()
					if set.has(0) && set.has(1) && s.workers[0].sleeping.Load() && s.workers[1].sleeping.Load() {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("workers 0 and 1 did not join and sleep")
						break
					}
					time.Sleep(100 * time.Microsecond)
				}
			}
			nop := &Codelet{Name: "nop", CPU: func(*Call) error { return nil }}
			require.NoError(t, s.Submit(ctx, nop, InContext(a)))
			assert.Equal(t, 1, hooked, "the push did not find the context empty")
			wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
			defer wcancel()
			if err := s.WaitAll(wctx); err != nil {
				// A lost task would make Close wait forever: leave the
				// scheduler to the failed test's process.
				t.Fatalf("lost wakeup or lost task: %v", err)
			}
			require.NoError(t, s.Close())
		})
	}
}
