package commbench_test

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/commbench"
	"github.com/pzgo/pz/comm/local"
)

// Example measures AllReduce of 8 bytes on 2 in-process ranks. Times vary,
// so it prints what was measured, not how long it took.
func Example() {
	cfg := commbench.Config{Ops: []string{commbench.OpAllReduce}, Sizes: []int{8}, Scale: 0.01, Backend: "local"}
	_ = local.Run(context.Background(), 2, func(ctx context.Context, c comm.Comm) error {
		rs, err := commbench.Measure(ctx, c, cfg)
		for _, r := range rs {
			fmt.Println(r.Op, r.Bytes, r.Ranks, r.Backend, r.MedianUS > 0)
		}
		return err
	})
	// Output: allreduce 8 2 local true
}
