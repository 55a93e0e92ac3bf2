package scheduler_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/pzgo/pz/scheduler"
)

// Two contexts with a worker and a policy each: tasks go to a context by
// an option or by the submitting call's ctx; deleting a context gives
// its workers to an inheritor.
func ExampleContext() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPerfModelDir(""))
	if err != nil {
		panic(err)
	}
	defer s.Close()
	small, _ := s.NewContext("small", scheduler.ContextWorkers(0))
	big, _ := s.NewContext("big", scheduler.ContextWorkers(1), scheduler.ContextPolicy("eager"))

	var ranOn [2]atomic.Int64
	where := &scheduler.Codelet{Name: "where", CPU: func(c *scheduler.Call) error {
		ranOn[c.Worker].Add(1)
		return nil
	}}
	for i := 0; i < 10; i++ {
		_ = s.Submit(ctx, where, scheduler.InContext(small))
	}
	inBig := scheduler.Within(ctx, big) // like starpu_sched_ctx_set_context
	for i := 0; i < 30; i++ {
		_ = s.Submit(inBig, where)
	}
	if err := s.WaitAll(ctx); err != nil {
		panic(err)
	}
	fmt.Println("worker 0 ran", ranOn[0].Load(), "tasks, worker 1 ran", ranOn[1].Load())

	_ = big.Delete(small) // its tasks finish, then its worker moves
	select {
	case <-big.Deleted():
	case <-time.After(10 * time.Second):
		panic("big was not deleted")
	}
	fmt.Println(small.Name(), "has workers", small.Workers())
	// Output:
	// worker 0 ran 10 tasks, worker 1 ran 30
	// small has workers [0 1]
}
