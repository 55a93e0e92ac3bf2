package scheduler_test

import (
	"context"
	"fmt"
	"runtime"

	"github.com/pzgo/pz/scheduler"
)

// A worker driven from the program's main goroutine, locked to its OS
// thread (where, say, a graphics or CUDA context must stay): the only
// worker of this scheduler, so every task runs here, inside d.Run.
func ExampleDriver() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx := context.Background()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithDrivenWorkers(1), scheduler.WithPerfModelDir(""))
	if err != nil {
		panic(err)
	}
	d, err := s.Driver(0)
	if err != nil {
		panic(err)
	}
	sum := 0
	h, _ := s.RegisterValue(&sum)
	add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
		*scheduler.ValueOf[*int](c, 0) += c.Arg.(int)
		return nil
	}}
	for i := 1; i <= 10; i++ {
		if err := s.Submit(ctx, add, scheduler.RW(h), scheduler.WithArg(i)); err != nil {
			panic(err)
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }() // waits for the tasks, then ends Run
	if err := d.Run(ctx); err != nil {
		panic(err)
	}
	if err := <-closed; err != nil {
		panic(err)
	}
	fmt.Println("sum:", sum, "tasks on the driven worker:", s.Stats()[0].Tasks)
	// Output: sum: 55 tasks on the driven worker: 10
}

// The submitting goroutine as a worker: with the driven worker the only
// one, Submit runs each task that is ready at once while more than the
// submit limit (8 per worker) are in flight, and WaitAll runs the ones
// queued before that.
func ExampleDriver_Submit() {
	ctx := context.Background()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithDrivenWorkers(1), scheduler.WithPerfModelDir(""))
	if err != nil {
		panic(err)
	}
	defer s.Close()
	d, err := s.Driver(0)
	if err != nil {
		panic(err)
	}
	if err := d.Init(); err != nil {
		panic(err)
	}
	defer d.Deinit()
	var sum, ran int // written by tasks that all run on this goroutine
	add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
		sum += c.Arg.(int)
		ran++
		return nil
	}}
	for i := 1; i <= 1000; i++ {
		if err := d.Submit(ctx, add, scheduler.WithArg(i)); err != nil {
			panic(err)
		}
	}
	during := ran
	fmt.Println("run during Submit:", during)
	if err := d.WaitAll(ctx); err != nil {
		panic(err)
	}
	fmt.Println("sum:", sum, "run in WaitAll:", ran-during)
	// Output:
	// run during Submit: 991
	// sum: 500500 run in WaitAll: 9
}
