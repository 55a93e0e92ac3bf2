package scheduler_test

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/scheduler"
)

// A simulated accelerator with room for one of two vectors: the tasks
// given to it move each vector in, evict the other (writing it back,
// since the device holds its only up-to-date copy), and WaitAll brings
// the last one home, so the Go slices hold the results.
func ExampleWithSimDevices() {
	ctx := context.Background()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1),
		scheduler.WithSimDevices(scheduler.SimDevice{Memory: 4 << 10}),
		scheduler.WithPerfModelDir(""))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	fmt.Println("memory nodes:", s.MemoryNodes())

	// A context of the device's worker alone (worker 1).
	dev, err := s.NewContext("device", scheduler.ContextWorkers(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	x, y := make([]float64, 512), make([]float64, 512) // 4 KiB each
	hx, _ := s.RegisterVector(x, scheduler.Named("x"))
	hy, _ := s.RegisterVector(y, scheduler.Named("y"))
	inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
		for i, v := range scheduler.VectorOf[float64](c, 0) {
			scheduler.VectorOf[float64](c, 0)[i] = v + 1
		}
		return nil
	}}
	for _, h := range []*scheduler.Handle{hx, hy, hx} {
		if err := s.Submit(ctx, inc, scheduler.RW(h), scheduler.InContext(dev)); err != nil {
			fmt.Println(err)
			return
		}
	}
	if err := s.WaitAll(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("x:", x[0], x[511], "y:", y[0], y[511])
	// One row per pair of memory nodes; evictions from a node are on
	// its own row (sim0→sim0, which has no copies): x's replica made
	// room for y's, and y's for x's again, each written back first.
	for _, t := range s.Transfers() {
		fmt.Printf("%s→%s: %d copies, %d evictions, %d written back\n",
			s.MemoryNodes()[t.From], s.MemoryNodes()[t.To], t.Count, t.Evictions, t.WriteBacks)
	}
	// Output:
	// memory nodes: [ram sim0]
	// x: 2 2 y: 1 1
	// ram→sim0: 3 copies, 0 evictions, 0 written back
	// sim0→ram: 3 copies, 0 evictions, 2 written back
	// sim0→sim0: 0 copies, 2 evictions, 0 written back
}
