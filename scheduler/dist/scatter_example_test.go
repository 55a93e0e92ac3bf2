package dist_test

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// A 5 x 3 matrix on rank 0 goes to two ranks in tiles of 2 x 2, as
// ScaLAPACK cuts it: the last row of tiles is 1 row high and the last
// column 1 column wide (RegisterMatrixTiles registers each at its own
// shape). A task on each tile adds 100 times the rank it runs on, its
// owner's (Cyclic1D over 2 tile columns gives rank 1 the last column),
// and rank 0 gathers the matrix back.
func ExampleScatterMatrix() {
	const rows, cols, mb, nb = 5, 3, 2, 2
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

		// 3 x 2 tiles, the edge ones smaller; Cyclic1D over 2 tile
		// columns gives rank 1 the last column.
		tiles, err := dist.RegisterMatrixTiles[int](d, rows, cols, mb, nb, dist.Cyclic1D(2, d.Size()), nil)
		if err != nil {
			return err
		}
		var a []int
		if d.Rank() == 0 {
			a = make([]int, rows*cols)
			for k := range a {
				a[k] = k
			}
		}
		if err := dist.ScatterMatrix(ctx, d, 0, a, rows, cols, tiles); err != nil {
			return err
		}
		// Each rank's codelet adds its own rank: the matrix shows where
		// each tile's task ran.
		me := d.Rank()
		addRank := &scheduler.Codelet{Name: "add-rank", CPU: func(c *scheduler.Call) error {
			t := scheduler.VectorOf[int](c, 0)
			for k := range t {
				t[k] += 100 * me
			}
			return nil
		}}
		for _, row := range tiles {
			for _, h := range row {
				if err := d.Submit(ctx, addRank, dist.RW(h)); err != nil { // runs on h's owner
					return err
				}
			}
		}
		if err := dist.GatherMatrix(ctx, d, 0, a, rows, cols, tiles); err != nil {
			return err
		}
		if d.Rank() == 0 {
			for i := range rows {
				fmt.Println(a[i*cols : (i+1)*cols])
			}
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// [0 1 102]
	// [3 4 105]
	// [6 7 108]
	// [9 10 111]
	// [12 13 114]
}
