package dist_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// A 5 x 7 matrix in tiles of at most 2 x 3 is a 3 x 3 grid, as
// ScaLAPACK cuts it: the last row of tiles is 1 row high and the last
// column 1 column wide. Two ranks register it (BlockCyclic2D(1, 2): rank
// j mod 2 owns tile column j), each owner filling its tiles from the
// matrix's element formula, 10*row + col; a task on each tile adds 100
// times one more than the rank it runs on (its owner's: owner computes),
// and rank 0 gathers the matrix.
func ExampleRegisterMatrixTiles() {
	const rows, cols, mb, nb = 5, 7, 2, 3
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

		// init learns each tile's shape, tileRows x tileCols; its element
		// (r, k) is element (i*mb + r, j*nb + k) of the matrix.
		fill := func(i, j, tileRows, tileCols int, tile []int) {
			for r := range tileRows {
				for k := range tileCols {
					tile[r*tileCols+k] = 10*(i*mb+r) + j*nb + k
				}
			}
		}
		tiles, err := dist.RegisterMatrixTiles(d, rows, cols, mb, nb, dist.BlockCyclic2D(1, 2), fill, scheduler.Named("A"))
		if err != nil {
			return err
		}
		// Each rank's codelet adds its own rank: the matrix shows where
		// each tile's task ran.
		me := d.Rank()
		addRank := &scheduler.Codelet{Name: "add-rank", CPU: func(c *scheduler.Call) error {
			t := scheduler.VectorOf[int](c, 0)
			for k := range t {
				t[k] += 100 * (me + 1)
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
		var a []int
		if d.Rank() == 0 {
			a = make([]int, rows*cols)
		}
		if err := dist.GatherMatrix(ctx, d, 0, a, rows, cols, tiles); err != nil {
			return err
		}
		if d.Rank() == 0 {
			for _, row := range tiles {
				shapes := make([]string, len(row))
				for j, h := range row {
					shapes[j] = fmt.Sprintf("%dx%d on rank %d", h.Rows(), h.Cols(), h.Owner())
				}
				fmt.Println(strings.Join(shapes, ", "))
			}
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
	// 2x3 on rank 0, 2x3 on rank 1, 2x1 on rank 0
	// 2x3 on rank 0, 2x3 on rank 1, 2x1 on rank 0
	// 1x3 on rank 0, 1x3 on rank 1, 1x1 on rank 0
	// [100 101 102 203 204 205 106]
	// [110 111 112 213 214 215 116]
	// [120 121 122 223 224 225 126]
	// [130 131 132 233 234 235 136]
	// [140 141 142 243 244 245 146]
}
