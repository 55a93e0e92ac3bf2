package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/pzgo/pz/scheduler"
)

// OnDone sees each task's outcome as it completes, without keeping the
// task: here it counts which of 12 samples were rejected while WaitAll
// still returns every failure.
func ExampleOnDone() {
	ctx := context.Background()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPerfModelDir(""))
	if err != nil {
		panic(err)
	}
	defer s.Close()

	errOutlier := errors.New("outlier")
	check := &scheduler.Codelet{Name: "check", CPU: func(c *scheduler.Call) error {
		if c.Arg.(int)%5 == 0 {
			return errOutlier
		}
		return nil
	}}
	var ok, rejected atomic.Int32
	count := func(err error) {
		if errors.Is(err, errOutlier) {
			rejected.Add(1)
		} else if err == nil {
			ok.Add(1)
		}
	}
	for i := range 12 {
		if err := s.Submit(ctx, check, scheduler.WithArg(i), scheduler.OnDone(count)); err != nil {
			panic(err)
		}
	}
	err = s.WaitAll(ctx)
	fmt.Println("accepted:", ok.Load(), "rejected:", rejected.Load())
	fmt.Println("WaitAll reports them:", errors.Is(err, errOutlier))
	// Output:
	// accepted: 9 rejected: 3
	// WaitAll reports them: true
}
