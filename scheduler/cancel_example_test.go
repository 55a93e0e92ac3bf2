package scheduler_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/pzgo/pz/scheduler"
)

// A stage of work submitted with CancelOn(stop) does not start once stop
// has ended: here the first task finds a fault and ends stop, so the
// second, which waits for it, completes without running.
func ExampleCancelOn() {
	ctx := context.Background()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPerfModelDir(""))
	if err != nil {
		panic(err)
	}
	defer s.Close()

	stop, cancel := context.WithCancelCause(ctx)
	check := scheduler.NewTask(&scheduler.Codelet{Name: "check", CPU: func(*scheduler.Call) error {
		cancel(errors.New("input rejected"))
		return nil
	}})
	solve := scheduler.NewTask(&scheduler.Codelet{Name: "solve", CPU: func(*scheduler.Call) error {
		fmt.Println("solve ran")
		return nil
	}}, scheduler.After(check), scheduler.CancelOn(stop))
	if err := s.SubmitTask(ctx, solve); err != nil {
		panic(err)
	}
	if err := s.SubmitTask(ctx, check); err != nil {
		panic(err)
	}
	_ = s.WaitAll(ctx) // reports solve's cancellation
	fmt.Println("check:", check.Err())
	fmt.Println("solve canceled:", errors.Is(solve.Err(), scheduler.ErrCanceled))
	fmt.Println("cause:", context.Cause(stop))
	// Output:
	// check: <nil>
	// solve canceled: true
	// cause: input rejected
}
