package dist_test

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// Three ranks each own a counter and a result. One task per rank writes
// that rank's result (so it runs there) from all three counters: each
// counter travels to the two other ranks, once.
func Example() {
	err := local.Run(context.Background(), 3, func(ctx context.Context, c comm.Comm) error {
		ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
		if err != nil {
			return err
		}
		defer ls.Close()
		d, err := dist.New(ctx, c, ls)
		if err != nil {
			return err
		}
		defer d.Close()

		counters := make([]*dist.Handle, d.Size())
		for r := range d.Size() {
			var mine []int64
			if r == d.Rank() {
				mine = []int64{int64(10 * (r + 1))} // 10, 20, 30
			}
			if counters[r], err = dist.Register(d, r, mine, 1, 1); err != nil {
				return err
			}
		}
		sum := &scheduler.Codelet{Name: "sum", CPU: func(c *scheduler.Call) error {
			dst := scheduler.VectorOf[int64](c, 0)
			for i := 1; i < c.Len(); i++ {
				dst[0] += scheduler.VectorOf[int64](c, i)[0]
			}
			return nil
		}}
		tmp := make([]*dist.Handle, d.Size())
		for r := range d.Size() {
			var buf []int64
			if r == d.Rank() {
				buf = make([]int64, 1)
			}
			if tmp[r], err = dist.Register(d, r, buf, 1, 1); err != nil {
				return err
			}
			args := []dist.Arg{dist.RW(tmp[r])}
			for j := range d.Size() {
				args = append(args, dist.R(counters[j]))
			}
			if err := d.Submit(ctx, sum, args...); err != nil {
				return err
			}
		}
		if err := d.WaitAll(ctx); err != nil {
			return err
		}
		all, err := comm.GatherValues(ctx, c, tmp[d.Rank()].Data().([]int64)[0], 0)
		if err == nil && d.Rank() == 0 {
			fmt.Println("sums on ranks 0, 1, 2:", all, "messages from rank 0:", d.Stats().MessagesSent)
		}
		return err
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// sums on ranks 0, 1, 2: [60 60 60] messages from rank 0: 2
}
