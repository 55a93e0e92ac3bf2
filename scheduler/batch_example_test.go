package scheduler_test

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/scheduler"
)

// Build a chain of updates of one vector as a whole, then start it: the
// batch holds its tasks (nothing has run when Len is printed) until
// Flush, and orders them as Submit would have.
func ExampleBatch() {
	ctx := context.Background()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPerfModelDir(""))
	if err != nil {
		panic(err)
	}
	defer s.Close()

	x := []float64{1}
	h, _ := s.RegisterVector(x)
	step := &scheduler.Codelet{Name: "step", CPU: func(c *scheduler.Call) error {
		v := scheduler.VectorOf[float64](c, 0)
		v[0] = 2*v[0] + float64(c.Arg.(int)) // order matters
		return nil
	}}
	b := s.NewBatch()
	for i := range 10 {
		if err := b.Submit(ctx, step, scheduler.RW(h), scheduler.WithArg(i)); err != nil {
			panic(err)
		}
	}
	fmt.Println("held:", b.Len(), "x:", x[0])
	b.Flush()
	if err := s.WaitAll(ctx); err != nil {
		panic(err)
	}
	fmt.Println("x:", x[0])
	// Output:
	// held: 10 x: 1
	// x: 2037
}
