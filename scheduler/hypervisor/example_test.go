package hypervisor_test

import (
	"context"
	"fmt"
	"time"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/hypervisor"
)

// The app_driven policy moves a worker from a to b when the task tagged
// 1 has run.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(3), scheduler.WithPerfModelDir(""))
	if err != nil {
		panic(err)
	}
	defer s.Close()
	a, _ := s.NewContext("a", scheduler.ContextWorkers(0, 1))
	b, _ := s.NewContext("b", scheduler.ContextWorkers(2))

	pol := hypervisor.NewAppDriven()
	resized := make(chan hypervisor.Resize, 1)
	hv, err := hypervisor.New(s, hypervisor.WithPolicy(pol), hypervisor.WithOnResize(func(r hypervisor.Resize) { resized <- r }))
	if err != nil {
		panic(err)
	}
	defer hv.Close()
	_ = hv.Register(a, hypervisor.Limits{})
	_ = hv.Register(b, hypervisor.Limits{})
	if err := pol.OnTag(1, a, b, 1); err != nil {
		panic(err)
	}

	phase1 := &scheduler.Codelet{Name: "phase1", CPU: func(*scheduler.Call) error { return nil }}
	_ = s.Submit(ctx, phase1, scheduler.InContext(a), scheduler.WithTag(1))
	if err := s.WaitAll(ctx); err != nil {
		panic(err)
	}
	// The resize is decided right after the task completes, on the
	// worker that ran it.
	var r hypervisor.Resize
	select {
	case r = <-resized:
	case <-ctx.Done():
		panic("no resize")
	}
	fmt.Printf("%s -> %s by %s: workers in a: %d, in b: %d\n", r.From, r.To, r.Policy, len(a.Workers()), len(b.Workers()))
	// Output:
	// a -> b by app_driven: workers in a: 1, in b: 2
}
