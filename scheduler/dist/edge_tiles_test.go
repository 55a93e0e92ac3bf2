package dist_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// edgeCases are rows x cols matrices in tiles of at most mb x nb:
// edge tiles in both directions, in one, in none, and a tile larger than
// the matrix.
var edgeCases = []rectCase{
	{name: "both", rows: 17, cols: 10, mb: 4, nb: 3},     // 5 x 4 tiles, the last row 1 high, the last column 1 wide
	{name: "rows", rows: 14, cols: 9, mb: 4, nb: 3},      // 4 x 3 tiles, the last row 2 high
	{name: "cols", rows: 6, cols: 11, mb: 3, nb: 4},      // 2 x 3 tiles, the last column 3 wide
	{name: "multiples", rows: 8, cols: 6, mb: 4, nb: 3},  // 2 x 2 full tiles, as RegisterTiles makes
	{name: "one tile", rows: 3, cols: 5, mb: 8, nb: 8},   // 1 x 1 tile of 3 x 5
	{name: "column", rows: 10, cols: 1, mb: 3, nb: 1},    // 4 x 1 tiles, a vector
	{name: "row", rows: 1, cols: 10, mb: 1, nb: 4},       // 1 x 3 tiles
	{name: "tiny tiles", rows: 5, cols: 3, mb: 1, nb: 2}, // 5 x 2 tiles
}

// tileShape is the shape tile (i, j) of c has: ScaLAPACK's cut.
func (c rectCase) tileShape(i, j int) (rows, cols int) {
	return min(c.mb, c.rows-i*c.mb), min(c.nb, c.cols-j*c.nb)
}

// edgeArg is a tile's place and shape for edgeUpdate.
type edgeArg struct {
	i, j       int
	row, col   int // the tile's first element in the matrix
	rows, cols int // the shape it must have
}

// edgeUpdate applies rectStep to a tile, learning its shape from the
// call (Dims), which must be the one its edgeArg says.
var edgeUpdate = &scheduler.Codelet{Name: "edge-update", CPU: func(c *scheduler.Call) error {
	a := c.Arg.(edgeArg)
	rows, cols, _ := c.Dims(0)
	if rows != a.rows || cols != a.cols {
		return fmt.Errorf("tile (%d, %d) is %d x %d in its task, want %d x %d", a.i, a.j, rows, cols, a.rows, a.cols)
	}
	t := scheduler.VectorOf[float64](c, 0)
	for r := range rows {
		for k := range cols {
			t[r*cols+k] = rectStep(t[r*cols+k], a.row+r, a.col+k)
		}
	}
	return nil
}}

// edgeRoundTrip registers c's grid with RegisterMatrixTiles, filled by
// init from rectValue, and checks the grid's shape and every tile's on
// every rank; gathers it on rank 0 and compares with rectValue; then
// scatterStepGather with another matrix (rectValue + 1000).
func edgeRoundTrip(ctx context.Context, d *dist.Scheduler, c rectCase, dd dist.Distribution) error {
	mt, nt := c.grid()
	inits := 0
	tiles, err := dist.RegisterMatrixTiles(d, c.rows, c.cols, c.mb, c.nb, dd, func(i, j, rows, cols int, tile []float64) {
		inits++
		if wr, wc := c.tileShape(i, j); rows != wr || cols != wc || len(tile) != wr*wc {
			panic(fmt.Sprintf("init of tile (%d, %d): %d x %d, %d elements; want %d x %d", i, j, rows, cols, len(tile), wr, wc))
		}
		for r := range rows {
			for k := range cols {
				tile[r*cols+k] = rectValue(i*c.mb+r, j*c.nb+k)
			}
		}
	}, scheduler.Named("E"))
	if err != nil {
		return err
	}
	if len(tiles) != mt {
		return fmt.Errorf("%d rows of tiles, want %d", len(tiles), mt)
	}
	mine := 0
	for i, row := range tiles {
		if len(row) != nt {
			return fmt.Errorf("row %d of tiles has %d, want %d", i, len(row), nt)
		}
		for j, h := range row {
			if wr, wc := c.tileShape(i, j); h.Rows() != wr || h.Cols() != wc {
				return fmt.Errorf("tile (%d, %d) is %d x %d on rank %d, want %d x %d", i, j, h.Rows(), h.Cols(), d.Rank(), wr, wc)
			}
			if h.Owner() != dd.Owner(i, j) {
				return fmt.Errorf("tile (%d, %d) is owned by %d, the distribution says %d", i, j, h.Owner(), dd.Owner(i, j))
			}
			if h.Owner() == d.Rank() {
				mine++
			}
		}
	}
	if inits != mine {
		return fmt.Errorf("init ran %d times on rank %d, which owns %d tiles", inits, d.Rank(), mine)
	}

	var out []float64
	if d.Rank() == 0 {
		out = make([]float64, c.rows*c.cols)
	}
	if err := dist.GatherMatrix(ctx, d, 0, out, c.rows, c.cols, tiles); err != nil {
		return err
	}
	if d.Rank() == 0 {
		for i := range c.rows {
			for j := range c.cols {
				if got, want := out[i*c.cols+j], rectValue(i, j); got != want {
					return fmt.Errorf("element (%d, %d) as init filled it is %v, want %v", i, j, got, want)
				}
			}
		}
	}

	return scatterStepGather(ctx, d, c, tiles, 1000)
}

// RegisterMatrixTiles registers a rows x cols matrix's tiles with the
// edge tiles at their own shape, filled by init on their owners; the
// grid goes through GatherMatrix, ScatterMatrix and tasks as any, on 1
// to 4 ranks with both distributions.
func TestRegisterMatrixTiles(t *testing.T) {
	for n := 1; n <= 4; n++ {
		for _, c := range edgeCases {
			_, nt := c.grid()
			for _, dd := range rectDists(nt, n) {
				t.Run(fmt.Sprintf("ranks=%d/%s/%s", n, c.name, dd.name), func(t *testing.T) {
					require.NoError(t, runRanks(t, n, func(ctx context.Context, d *dist.Scheduler) error {
						return edgeRoundTrip(ctx, d, c, dd.dist)
					}))
				})
			}
		}
	}
}

// The tiles are named "A(i,j)" with scheduler.Named("A"), and options
// apply to each; RegisterTiles' grid is RegisterMatrixTiles' when the
// tile divides the matrix.
func TestRegisterMatrixTilesNamed(t *testing.T) {
	require.NoError(t, runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
		a, err := dist.RegisterMatrixTiles[float64](d, 7, 5, 3, 2, dist.BlockCyclic2D(1, 2), nil, scheduler.Named("A"))
		if err != nil {
			return err
		}
		if got, want := a[2][2].String(), `handle "A(2,2)" (#8, owner 0)`; got != want {
			return fmt.Errorf("the last tile is %s, want %s", got, want)
		}
		if a[2][2].Rows() != 1 || a[2][2].Cols() != 1 {
			return fmt.Errorf("the corner tile of a 7 x 5 matrix in 3 x 2 tiles is %d x %d, want 1 x 1", a[2][2].Rows(), a[2][2].Cols())
		}
		// scheduler.LD of the tiles' width is accepted when every tile
		// has it.
		b, err := dist.RegisterMatrixTiles[float64](d, 6, 4, 3, 2, dist.BlockCyclic2D(1, 2), nil, scheduler.Named("B"), scheduler.LD(2))
		if err != nil {
			return err
		}
		c, err := dist.RegisterTiles[float64](d, 2, 2, 3, 2, dist.BlockCyclic2D(1, 2), nil, scheduler.Named("C"))
		if err != nil {
			return err
		}
		for i := range 2 {
			for j := range 2 {
				if b[i][j].Owner() != c[i][j].Owner() || b[i][j].Rows() != c[i][j].Rows() || b[i][j].Cols() != c[i][j].Cols() {
					return fmt.Errorf("tile (%d, %d): %d x %d on rank %d from RegisterMatrixTiles, %d x %d on rank %d from RegisterTiles",
						i, j, b[i][j].Rows(), b[i][j].Cols(), b[i][j].Owner(), c[i][j].Rows(), c[i][j].Cols(), c[i][j].Owner())
				}
			}
		}
		return d.WaitAll(ctx)
	}))
}

// Every bad input gets the same error on every rank, and registers
// nothing: the next handle registered is #0, and the ranks' graphs still
// agree.
func TestRegisterMatrixTilesBad(t *testing.T) {
	const ranks = 3
	type badCase struct {
		name               string
		rows, cols, mb, nb int
		dist               dist.Distribution
		opts               []scheduler.HandleOption
		is                 error
		want               string
	}
	cyc := dist.Cyclic1D(4, ranks) // fits a 17 x 10 matrix in 4 x 3 tiles: 4 tile columns
	cases := []badCase{
		{"zero rows", 0, 10, 4, 3, cyc, nil, comm.ErrInvalidArg, "a 0 x 10 matrix in tiles of 4 x 3"},
		{"negative cols", 17, -10, 4, 3, cyc, nil, comm.ErrInvalidArg, "a 17 x -10 matrix in tiles of 4 x 3"},
		{"zero mb", 17, 10, 0, 3, cyc, nil, comm.ErrInvalidArg, "a 17 x 10 matrix in tiles of 0 x 3"},
		{"negative nb", 17, 10, 4, -3, cyc, nil, comm.ErrInvalidArg, "a 17 x 10 matrix in tiles of 4 x -3"},
		{"nil distribution", 17, 10, 4, 3, nil, nil, dist.ErrDistribution, "no distribution (nil)"},
		{"grid for other ranks", 17, 10, 4, 3, dist.BlockCyclic2D(2, 2), nil, dist.ErrDistribution, "a 2 x 2 process grid for 3 ranks"},
		{"Cyclic1D for other ranks", 17, 10, 4, 3, dist.Cyclic1D(4, 2), nil, dist.ErrDistribution, "a 1D cyclic distribution over 2 ranks (4 tile columns) used with 3 ranks"},
		// 10 columns in tiles 3 wide are 4 tile columns, not 3.
		{"Cyclic1D for other tile columns", 17, 10, 4, 3, dist.Cyclic1D(3, ranks), nil, dist.ErrDistribution,
			"Cyclic1D(3, 3) deals tiles over 3 tile columns, but the grid has 4 (5 x 4 tiles): pass Cyclic1D(4, 3)"},
		{"owner outside the ranks", 17, 10, 4, 3, dist.Func(func(i, j int) int { return i + j }), nil, dist.ErrBadRank,
			"the distribution gives tile (0, 3) to rank 3 of 3"},
		{"LD of the inner tiles", 17, 10, 4, 3, cyc, []scheduler.HandleOption{scheduler.LD(3)}, comm.ErrInvalidArg,
			"scheduler.LD(3) for 1 columns"},
		{"LD of the matrix", 17, 10, 4, 3, cyc, []scheduler.HandleOption{scheduler.LD(10)}, comm.ErrInvalidArg,
			"scheduler.LD(10) for 3 columns"},
	}
	errs := make([][ranks]error, len(cases))
	require.NoError(t, runRanks(t, ranks, func(ctx context.Context, d *dist.Scheduler) error {
		for k, c := range cases {
			inits := 0
			tiles, err := dist.RegisterMatrixTiles(d, c.rows, c.cols, c.mb, c.nb, c.dist, func(int, int, int, int, []float64) { inits++ }, c.opts...)
			if tiles != nil || inits != 0 {
				return fmt.Errorf("%s: %d rows of tiles registered, init ran %d times", c.name, len(tiles), inits)
			}
			errs[k][d.Rank()] = err
		}
		// Nothing was registered: the next handle is #0, and a graph
		// over it runs.
		tiles, err := dist.RegisterMatrixTiles[float64](d, 17, 10, 4, 3, cyc, nil)
		if err != nil {
			return err
		}
		if id := tiles[0][0].ID(); id != 0 {
			return fmt.Errorf("the first tile registered after the refusals is #%d, want #0", id)
		}
		return dist.ScatterMatrix(ctx, d, 0, make([]float64, 17*10), 17, 10, tiles)
	}))
	for k, c := range cases {
		for r := range ranks {
			err := errs[k][r]
			if assert.Error(t, err, "%s, rank %d", c.name, r) {
				assert.True(t, errors.Is(err, c.is), "%s, rank %d: %v is not %v", c.name, r, err, c.is)
				assert.Contains(t, err.Error(), "dist: RegisterMatrixTiles: ", "%s, rank %d", c.name, r)
				assert.Contains(t, err.Error(), c.want, "%s, rank %d", c.name, r)
				assert.Equal(t, errs[k][0].Error(), err.Error(), "%s: rank %d's error differs from rank 0's", c.name, r)
			}
		}
	}
}

// rootCallTimeout bounds each call of TestRootOutOfRangeOnOneRank: before
// the fix the ranks with a good root waited in the collective for ever
// while the one with the bad root had returned; a fixed build returns in
// milliseconds.
const rootCallTimeout = 20 * time.Second

// When one rank passes a root outside the ranks and the others a good
// one, every rank returns an error (ScatterMatrix, GatherMatrix, Scatter,
// Gather): the same comm.ErrMismatch naming the bad root, before anything
// is submitted. When every rank passes the same bad root, every rank gets
// ErrBadRank; different good roots are comm.ErrMismatch too. Afterwards
// the ranks still scatter and gather.
func TestRootOutOfRangeOnOneRank(t *testing.T) {
	const ranks = 3
	type rootCase struct {
		name  string
		roots [ranks]int
		is    error
		want  string
	}
	cases := []rootCase{
		{"rank 2 past the ranks", [ranks]int{0, 0, 5}, comm.ErrMismatch, "every rank passes the same (rank 2's root 5 is not a rank of 3)"},
		{"rank 1 negative", [ranks]int{2, -1, 2}, comm.ErrMismatch, "rank 1's root -1 is not a rank of 3"},
		{"every rank past the ranks", [ranks]int{3, 3, 3}, dist.ErrBadRank, "root 3 of 3 ranks"},
		{"good roots that differ", [ranks]int{0, 1, 0}, comm.ErrMismatch, "rank 1 root 1"},
	}
	calls := []string{"ScatterMatrix", "GatherMatrix", "Scatter", "Gather"}
	errs := make([][ranks]error, len(cases)*len(calls)) // [case*len(calls)+call][rank]
	nop := func(int, any) error { return nil }
	require.NoError(t, runRanks(t, ranks, func(ctx context.Context, d *dist.Scheduler) error {
		tiles, err := dist.RegisterMatrixTiles[float64](d, 5, 4, 2, 3, dist.Cyclic1D(2, ranks), nil, scheduler.Named("R"))
		if err != nil {
			return err
		}
		hs := []*dist.Handle{tiles[0][0], tiles[2][1]}
		a := make([]float64, 5*4)
		for k, c := range cases {
			root := c.roots[d.Rank()]
			for m, call := range calls {
				cctx, cancel := context.WithTimeout(ctx, rootCallTimeout)
				var err error
				switch call {
				case "ScatterMatrix":
					err = dist.ScatterMatrix(cctx, d, root, a, 5, 4, tiles)
				case "GatherMatrix":
					err = dist.GatherMatrix(cctx, d, root, a, 5, 4, tiles)
				case "Scatter":
					err = d.Scatter(cctx, root, hs, nop)
				case "Gather":
					err = d.Gather(cctx, root, hs, nop)
				}
				cancel()
				errs[k*len(calls)+m][d.Rank()] = err
			}
		}
		// Nothing was submitted: the ranks' graphs agree and go on.
		for k := range a {
			a[k] = float64(k)
		}
		if err := dist.ScatterMatrix(ctx, d, 1, a, 5, 4, tiles); err != nil {
			return err
		}
		out := make([]float64, 5*4)
		if err := dist.GatherMatrix(ctx, d, 2, out, 5, 4, tiles); err != nil {
			return err
		}
		if d.Rank() == 2 {
			for k, v := range out {
				if v != float64(k) {
					return fmt.Errorf("after the bad roots, element %d came back as %v", k, v)
				}
			}
		}
		return nil
	}))
	for k, c := range cases {
		for m, call := range calls {
			e := errs[k*len(calls)+m]
			for r := range ranks {
				if assert.Error(t, e[r], "%s, %s, rank %d", c.name, call, r) {
					assert.True(t, errors.Is(e[r], c.is), "%s, %s, rank %d: %v is not %v", c.name, call, r, e[r], c.is)
					assert.Contains(t, e[r].Error(), "dist: "+call+": ", "%s, rank %d", c.name, r)
					assert.Contains(t, e[r].Error(), c.want, "%s, %s, rank %d", c.name, call, r)
					assert.Equal(t, e[0].Error(), e[r].Error(), "%s, %s: rank %d's error differs from rank 0's", c.name, call, r)
				}
			}
		}
	}
}

// The exchange that begins Scatter and ScatterMatrix is bounded by the
// stall timeout, as WaitAll's agreement is: a rank that does not come
// (stuck here on a channel) does not hang the others, which end with
// ErrStalled naming the call. (The call's first step is now a comparison
// of the graphs, which names the rank that has not reached it.)
func TestScatterExchangeStalls(t *testing.T) {
	for _, call := range []string{"Scatter", "ScatterMatrix"} {
		var rank0 error
		done := make(chan struct{})
		// Without the bound rank 0 would wait for ever: the test's
		// deadline ends it with another error.
		tctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = local.Run(tctx, 2, func(ctx context.Context, c comm.Comm) error {
			ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
			if err != nil {
				return err
			}
			defer ls.Close()
			d, err := dist.New(ctx, c, ls, dist.WithStallTimeout(100*time.Millisecond))
			if err != nil {
				return err
			}
			defer d.Close()
			var mine []float64
			if c.Rank() == 0 {
				mine = make([]float64, 4)
			}
			h, err := dist.Register(d, 0, mine, 2, 2)
			if err != nil {
				return err
			}
			if c.Rank() == 1 {
				<-done // stuck until rank 0 has given up
				return nil
			}
			defer close(done)
			if call == "Scatter" {
				rank0 = d.Scatter(ctx, 0, []*dist.Handle{h}, func(int, any) error { return nil })
			} else {
				rank0 = dist.ScatterMatrix(ctx, d, 0, make([]float64, 4), 2, 2, [][]*dist.Handle{{h}})
			}
			return nil
		})
		require.ErrorIs(t, rank0, dist.ErrStalled, call)
		assert.Contains(t, rank0.Error(), "dist: "+call+": ", call)
		assert.Contains(t, rank0.Error(), "did not complete in 100ms; rank 1 has not reached this comparison", call)
	}
}
