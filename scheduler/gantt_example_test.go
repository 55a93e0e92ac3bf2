package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pzgo/pz/scheduler"
)

// Draw the Gantt chart of a run with its critical path: a chain of three
// slow tasks and, beside it, a longer chain of four quick ones. The
// critical path weighs tasks by their run times, so it is the slow chain.
func ExampleScheduler_WriteGantt() {
	ctx := context.Background()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithStats(true), scheduler.WithPerfModelDir(""))
	if err != nil {
		panic(err)
	}
	defer s.Close()

	slow := func(name string) *scheduler.Codelet {
		return &scheduler.Codelet{Name: name, CPU: func(*scheduler.Call) error {
			time.Sleep(5 * time.Millisecond)
			return nil
		}}
	}
	quick := &scheduler.Codelet{Name: "quick", CPU: func(*scheduler.Call) error { return nil }}
	var x, y int
	hx, _ := s.RegisterValue(&x)
	hy, _ := s.RegisterValue(&y)
	for _, cl := range []*scheduler.Codelet{slow("load"), slow("factor"), slow("store")} {
		if err := s.Submit(ctx, cl, scheduler.RW(hx)); err != nil { // RW: each waits for the one before
			panic(err)
		}
	}
	for range 4 {
		if err := s.Submit(ctx, quick, scheduler.RW(hy)); err != nil {
			panic(err)
		}
	}
	if err := s.WaitAll(ctx); err != nil {
		panic(err)
	}

	var names []string
	for _, t := range s.CriticalPath() {
		names = append(names, t.Name)
	}
	fmt.Println("critical path:", strings.Join(names, " -> "))

	var svg strings.Builder
	if err := s.WriteGantt(&svg, scheduler.GanttCriticalPath()); err != nil {
		panic(err)
	}
	fmt.Println("outlined bars:", strings.Count(svg.String(), `class="critical"`))
	// Output:
	// critical path: load -> factor -> store
	// outlined bars: 3
}
