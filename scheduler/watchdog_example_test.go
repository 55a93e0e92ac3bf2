package scheduler_test

import (
	"context"
	"fmt"
	"time"

	"github.com/pzgo/pz/scheduler"
)

// The watchdog says what a graph that stopped moving waits for: here a
// task that waits for a tag no task carries, behind one that runs on.
func ExampleWithWatchdog() {
	ctx := context.Background()
	stalls := make(chan scheduler.Stall, 1)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPerfModelDir(""),
		scheduler.WithWatchdog(50*time.Millisecond, func(st scheduler.Stall) {
			if len(st.Running) == 0 {
				return // reported before the worker took "long": wait for the next
			}
			select {
			case stalls <- st:
			default:
			}
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	gate := make(chan struct{})
	long := &scheduler.Codelet{Name: "long", CPU: func(*scheduler.Call) error { <-gate; return nil }}
	next := &scheduler.Codelet{Name: "next", CPU: func(*scheduler.Call) error { return nil }}
	// next first: once long runs, both are in flight whenever the
	// watchdog looks (a report between the two submissions would count
	// one task and name no wait).
	_ = s.Submit(ctx, next, scheduler.AfterTags(42))
	_ = s.Submit(ctx, long)

	st := <-stalls
	fmt.Println(st.InFlight, "tasks in flight")
	for _, r := range st.Running {
		fmt.Printf("worker %d runs %q\n", r.Worker, r.Codelet)
	}
	for _, c := range st.Causes {
		fmt.Println(c)
	}
	close(gate)
	fmt.Println(s.Close() != nil) // Close cancels "next": tag 42 never comes
	// Output:
	// 2 tasks in flight
	// worker 0 runs "long"
	// scheduler: waiting for a task never submitted: task "next" waits for tag 42, which no submitted task carries; submit a task WithTag(42)
	// true
}
