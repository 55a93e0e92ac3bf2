package scheduler_test

import (
	"testing"
	"time"

	"github.com/pzgo/pz/scheduler"
)

// Helpers shared by the tests of several files: they wait for the event
// a test checks, never for time to pass.

// eventMonitor signals, without blocking, the workers that pop a task of
// codelet popName (on popped) and the workers' idle cycles (on idle);
// a nil channel is not used.
type eventMonitor struct {
	popName string
	popped  chan int
	idle    chan int
}

func notify(ch chan int, w int) {
	if ch == nil {
		return
	}
	select {
	case ch <- w:
	default:
	}
}

func (m *eventMonitor) TaskPushed(*scheduler.Context, *scheduler.Task) {}
func (m *eventMonitor) TaskPopped(_ *scheduler.Context, t *scheduler.Task, w int) {
	if t.Name() == m.popName {
		notify(m.popped, w)
	}
}
func (m *eventMonitor) IdleCycle(_ *scheduler.Context, w int, _ time.Duration) { notify(m.idle, w) }
func (m *eventMonitor) IdleEnd(*scheduler.Context, int, time.Duration)         {}
func (m *eventMonitor) TaskExecuted(*scheduler.Context, *scheduler.Task, int, time.Duration) {
}

// waitResize waits until worker has applied a context change for reason.
func waitResize(t *testing.T, s *scheduler.Scheduler, worker int, reason string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, r := range s.Resizes() {
			if r.Worker == worker && r.Reason == reason {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("worker %d did not apply its %q context change", worker, reason)
}

// everyWorkerLooked waits until every worker has looked for a task (in
// all the contexts it pops from) and found none: installing a monitor
// wakes every worker, and each reports an idle cycle when its search
// comes back empty. A test that checks that something did not run
// waits for this event instead of for time to pass.
func everyWorkerLooked(t *testing.T, s *scheduler.Scheduler) {
	t.Helper()
	m := &eventMonitor{idle: make(chan int, 64)}
	s.SetMonitor(m, time.Hour)
	defer s.SetMonitor(nil, 0)
	seen := map[int]bool{}
	deadline := time.After(10 * time.Second)
	for len(seen) < len(s.Workers()) {
		select {
		case w := <-m.idle:
			seen[w] = true
		case <-deadline:
			t.Fatalf("only workers %v went idle", seen)
		}
	}
}
