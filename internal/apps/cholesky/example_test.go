package cholesky_test

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/internal/apps/cholesky"
	"github.com/pzgo/pz/scheduler"
)

// A 4×4-tile Cholesky on 2 workers, checked.
func Example() {
	opts := cholesky.Options{
		N: 128, Block: 32, Precision: 64, Workers: 2, Check: true,
		// Keep performance models in memory (no cache directory).
		SchedulerOptions: []scheduler.Option{scheduler.WithPerfModelDir("")},
	}
	res, err := cholesky.Run(context.Background(), opts, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("tasks:", res.Tasks)
	if res.Residual < cholesky.Tolerance(64, opts.N) {
		fmt.Println("residual ok")
	}
	// Output:
	// tasks: 20
	// residual ok
}
