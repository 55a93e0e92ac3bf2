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

// Between two graphs, rank 0 changes the vector it owns with Update,
// which every rank calls: rank 1, which read and cached the vector in the
// first graph, receives the new version for its next read instead of
// computing from its stale copy.
func ExampleUpdate() {
	err := local.Run(context.Background(), 2, func(ctx context.Context, c comm.Comm) error {
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
		var mine []float64
		if d.Rank() == 0 {
			mine = []float64{1, 2}
		}
		v, err := dist.Register(d, 0, mine, 2, 1)
		if err != nil {
			return err
		}
		var seen []float64 // what rank 1's task read, each graph
		read := &scheduler.Codelet{Name: "read", CPU: func(c *scheduler.Call) error {
			seen = append(seen, scheduler.VectorOf[float64](c, 0)...)
			return nil
		}}
		for range 2 {
			if err := d.Submit(ctx, read, dist.R(v), dist.OnRank(1)); err != nil {
				return err
			}
			if err := d.WaitAll(ctx); err != nil {
				return err
			}
			err := dist.Update(ctx, d, v, func(x []float64) error {
				for i := range x {
					x[i] *= 10
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		if err := d.WaitAll(ctx); err != nil {
			return err
		}
		if d.Rank() == 1 {
			fmt.Println("rank 1 read", seen)
		}
		if d.Rank() == 0 {
			fmt.Println("rank 0 holds", v.Data())
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Unordered output:
	// rank 1 read [1 2 10 20]
	// rank 0 holds [100 200]
}

// A long iterative program registers a temporary each pass and
// unregisters it once read: rank 0 owns it, a task on rank 1 adds it to
// rank 1's sum (so it travels there), and Unregister, on every rank,
// gives rank 0 its data back and drops rank 1's copy.
func ExampleScheduler_Unregister() {
	err := local.Run(context.Background(), 2, func(ctx context.Context, c comm.Comm) error {
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
		var accMem []float64
		if d.Rank() == 1 {
			accMem = make([]float64, 1)
		}
		acc, err := dist.Register(d, 1, accMem, 1, 1)
		if err != nil {
			return err
		}
		add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
			scheduler.VectorOf[float64](c, 0)[0] += scheduler.VectorOf[float64](c, 1)[0]
			return nil
		}}
		for pass := range 3 {
			var mine []float64
			if d.Rank() == 0 {
				mine = []float64{float64(pass + 1)}
			}
			tmp, err := dist.Register(d, 0, mine, 1, 1, scheduler.Named("tmp"))
			if err != nil {
				return err
			}
			if err := d.Submit(ctx, add, dist.RW(acc), dist.R(tmp)); err != nil {
				return err
			}
			data, err := d.Unregister(ctx, tmp)
			if err != nil {
				return err
			}
			if d.Rank() == 0 {
				fmt.Println("pass", pass, "rank 0 gets back", data)
			}
		}
		if err := d.WaitAll(ctx); err != nil {
			return err
		}
		if d.Rank() == 1 {
			fmt.Println("rank 1's sum:", acc.Data())
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// pass 0 rank 0 gets back [1]
	// pass 1 rank 0 gets back [2]
	// pass 2 rank 0 gets back [3]
	// rank 1's sum: [6]
}
