package scheduler_test

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/scheduler"
)

// Scale a vector by 2 in four tiles, then sum it on one handle.
func Example() {
	ctx := context.Background()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPerfModelDir(""))
	if err != nil {
		panic(err)
	}
	defer s.Close()

	data := []float64{1, 2, 3, 4, 5, 6, 7, 8}
	v, _ := s.RegisterVector(data)
	tiles, _ := v.Partition(scheduler.Blocks(2, 1))
	scale := &scheduler.Codelet{Name: "scale", CPU: func(c *scheduler.Call) error {
		x := scheduler.VectorOf[float64](c, 0)
		for i := range x {
			x[i] *= 2
		}
		return nil
	}}
	for _, t := range tiles {
		if err := s.Submit(ctx, scale, scheduler.RW(t[0])); err != nil {
			panic(err)
		}
	}
	_ = v.Unpartition()

	var sum float64
	total, _ := s.RegisterValue(&sum)
	add := &scheduler.Codelet{Name: "sum", CPU: func(c *scheduler.Call) error {
		out := scheduler.ValueOf[*float64](c, 1)
		for _, x := range scheduler.VectorOf[float64](c, 0) {
			*out += x
		}
		return nil
	}}
	if err := s.Submit(ctx, add, scheduler.R(v), scheduler.W(total)); err != nil {
		panic(err)
	}
	if err := s.WaitAll(ctx); err != nil {
		panic(err)
	}
	fmt.Println(sum, data)
	// Output: 72 [2 4 6 8 10 12 14 16]
}
