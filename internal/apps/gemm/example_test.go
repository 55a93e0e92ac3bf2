package gemm_test

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/internal/apps/gemm"
	"github.com/pzgo/pz/scheduler"
)

// A 4×4-tile product on 2 workers, checked.
func Example() {
	opts := gemm.Options{N: 128, Block: 32, Precision: 32, Workers: 2, Check: true,
		SchedulerOptions: []scheduler.Option{scheduler.WithPerfModelDir("")}}
	res, err := gemm.Run(context.Background(), opts, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("tasks:", res.Tasks, "error ok:", res.MaxRelErr < gemm.Tolerance(32, opts.N))
	// Output: tasks: 16 error ok: true
}
