package scheduler_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/pzgo/pz/scheduler"
)

// pacedMonitor is a Monitor that is an IdlePacer: it wants two more
// idle cycles a millisecond apart once a worker sleeps, then none
// until WakeIdle (a Monitor alone would get one every idle tick, here
// an hour).
type pacedMonitor struct {
	paced  atomic.Int32
	parked chan struct{} // a worker sleeps until an event
	woken  atomic.Bool
	cycle  chan struct{} // an IdleCycle once woken
}

func (m *pacedMonitor) TaskPushed(*scheduler.Context, *scheduler.Task)                       {}
func (m *pacedMonitor) TaskPopped(*scheduler.Context, *scheduler.Task, int)                  {}
func (m *pacedMonitor) IdleEnd(*scheduler.Context, int, time.Duration)                       {}
func (m *pacedMonitor) TaskExecuted(*scheduler.Context, *scheduler.Task, int, time.Duration) {}

func (m *pacedMonitor) IdleCycle(*scheduler.Context, int, time.Duration) {
	if m.woken.Load() {
		select {
		case m.cycle <- struct{}{}:
		default:
		}
	}
}

func (m *pacedMonitor) NextIdleCycle(*scheduler.Context, int, time.Duration) time.Duration {
	if m.paced.Add(1) <= 2 {
		return time.Millisecond
	}
	select {
	case m.parked <- struct{}{}:
	default:
	}
	return 0 // until an event: a task, SetMonitor, WakeIdle, Close
}

// An IdlePacer says when a sleeping worker reports its next idle
// cycle; answering 0, it lets the worker sleep, at no CPU cost, until
// something wakes it, such as the monitor's own WakeIdle.
func ExampleIdlePacer() {
	ctx := context.Background()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPerfModelDir(""))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	m := &pacedMonitor{parked: make(chan struct{}, 1), cycle: make(chan struct{}, 1)}
	s.SetMonitor(m, time.Hour)

	wait := func(ch <-chan struct{}, what string) {
		select {
		case <-ch:
			fmt.Println(what)
		case <-time.After(30 * time.Second):
			fmt.Println("never:", what)
		}
	}
	wait(m.parked, "the worker sleeps until an event, after 2 paced idle cycles")
	m.woken.Store(true)
	s.WakeIdle()
	wait(m.cycle, "WakeIdle: the worker reported an idle cycle")
	// Output:
	// the worker sleeps until an event, after 2 paced idle cycles
	// WakeIdle: the worker reported an idle cycle
}
