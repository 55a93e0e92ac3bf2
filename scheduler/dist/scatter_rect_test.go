package dist_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// A rectCase is a rows x cols matrix cut into tiles of mb x nb, the last
// row and column of tiles smaller where mb or nb does not divide it.
type rectCase struct {
	name               string
	rows, cols, mb, nb int
	lower              bool // row i of tiles holds tiles 0..i only, as a triangle's grid
}

// rectCases are tall and wide matrices, with and without edge tiles, one
// with a lower trapezoid of tiles.
var rectCases = []rectCase{
	{name: "tall", rows: 24, cols: 6, mb: 4, nb: 3},                // 6 x 2 tiles
	{name: "wide", rows: 6, cols: 24, mb: 3, nb: 4},                // 2 x 6 tiles
	{name: "edges", rows: 14, cols: 9, mb: 4, nb: 4},               // 4 x 3 tiles, the last row 2 high, the last column 1 wide
	{name: "lower", rows: 17, cols: 10, mb: 4, nb: 3, lower: true}, // 5 x 4 tiles, edges 1 high and 1 wide
}

// grid returns c's tile rows and columns.
func (c rectCase) grid() (mt, nt int) { return (c.rows + c.mb - 1) / c.mb, (c.cols + c.nb - 1) / c.nb }

// A namedDist is a distribution and its name in the tests' messages.
type namedDist struct {
	name string
	dist dist.Distribution
}

// rectDists are the distributions the round trip runs with on size ranks
// for a grid of nt tile columns, in one order on every rank (a map's
// would differ between MPI processes, and so would their graphs).
func rectDists(nt, size int) []namedDist {
	p, q := dist.Grid(size)
	return []namedDist{{"BlockCyclic2D", dist.BlockCyclic2D(p, q)}, {"Cyclic1D", dist.Cyclic1D(nt, size)}}
}

// registerRect registers c's tiles on d, placed by dd
// (RegisterMatrixTiles: the edge tiles at their own shape). A lower
// case's rows of tiles are cut short after the diagonal.
func registerRect(d *dist.Scheduler, c rectCase, dd dist.Distribution) ([][]*dist.Handle, error) {
	tiles, err := dist.RegisterMatrixTiles[float64](d, c.rows, c.cols, c.mb, c.nb, dd, nil, scheduler.Named(c.name))
	if err != nil {
		return nil, err
	}
	if c.lower {
		for i := range tiles {
			tiles[i] = tiles[i][:min(i+1, len(tiles[i]))]
		}
	}
	return tiles, nil
}

// rectValue is element (i, j) of the matrix the round trip scatters.
func rectValue(i, j int) float64 { return float64(i*100+j) + 0.5 }

// rectStep is what the round trip's tasks do to element (i, j), of value
// v, of the matrix.
func rectStep(v float64, i, j int) float64 { return 3*v - float64(7*i) + float64(j) }

// rectRoundTrip registers c's tiles (registerRect) and runs
// scatterStepGather on them.
func rectRoundTrip(ctx context.Context, d *dist.Scheduler, c rectCase, dd dist.Distribution) error {
	tiles, err := registerRect(d, c, dd)
	if err != nil {
		return err
	}
	return scatterStepGather(ctx, d, c, tiles, 0)
}

// scatterStepGather scatters c's matrix (rectValue + base) from the last
// rank into tiles, checks each tile on its owner, runs one task per tile
// that applies rectStep (edgeUpdate), gathers the matrix on rank 0 and
// compares it with rectStep applied to every element the tiles cover
// (the others keep the gather's buffer's -1).
func scatterStepGather(ctx context.Context, d *dist.Scheduler, c rectCase, tiles [][]*dist.Handle, base float64) error {
	root := d.Size() - 1
	var a []float64
	if d.Rank() == root {
		a = make([]float64, c.rows*c.cols)
		for i := range c.rows {
			for j := range c.cols {
				a[i*c.cols+j] = rectValue(i, j) + base
			}
		}
	}
	if err := dist.ScatterMatrix(ctx, d, root, a, c.rows, c.cols, tiles); err != nil {
		return err
	}
	for i, row := range tiles {
		for j, h := range row {
			arg := edgeArg{i: i, j: j, row: i * c.mb, col: j * c.nb, rows: h.Rows(), cols: h.Cols()}
			if h.Owner() == d.Rank() {
				t := h.Data().([]float64)
				for k, v := range t {
					if want := rectValue(arg.row+k/arg.cols, arg.col+k%arg.cols) + base; v != want {
						return fmt.Errorf("tile (%d, %d) on its owner %d: element %d is %v after ScatterMatrix, want %v", i, j, d.Rank(), k, v, want)
					}
				}
			}
			if err := d.Submit(ctx, edgeUpdate, dist.RW(h), dist.With(scheduler.WithArg(arg))); err != nil {
				return err
			}
		}
	}
	var out []float64
	if d.Rank() == 0 {
		out = make([]float64, c.rows*c.cols)
		for k := range out {
			out[k] = -1 // stays where no tile covers
		}
	}
	if err := dist.GatherMatrix(ctx, d, 0, out, c.rows, c.cols, tiles); err != nil {
		return err
	}
	if d.Rank() != 0 {
		return nil
	}
	for i := range c.rows {
		for j := range c.cols {
			want := -1.0
			if !c.lower || j/c.nb <= i/c.mb {
				want = rectStep(rectValue(i, j)+base, i, j)
			}
			if got := out[i*c.cols+j]; got != want {
				return fmt.Errorf("gathered element (%d, %d) is %v, want %v", i, j, got, want)
			}
		}
	}
	return nil
}

// A rows x cols matrix with rows != cols goes from one rank's RAM to the
// tiles' owners and back to another rank, with tasks changing every tile
// on the way: tall and wide, with edge tiles smaller than mb x nb, and a
// lower trapezoid of tiles, on 1 to 4 ranks with both distributions.
func TestScatterGatherRectangular(t *testing.T) {
	for n := 1; n <= 4; n++ {
		for _, c := range rectCases {
			_, nt := c.grid()
			for _, dd := range rectDists(nt, n) {
				t.Run(fmt.Sprintf("ranks=%d/%s/%s", n, c.name, dd.name), func(t *testing.T) {
					require.NoError(t, runRanks(t, n, func(ctx context.Context, d *dist.Scheduler) error {
						return rectRoundTrip(ctx, d, c, dd.dist)
					}))
				})
			}
		}
	}
}

// Every bad rows x cols input gets the same error on every rank, before
// anything is submitted: afterwards a good call still works.
func TestScatterMatrixBadRectangular(t *testing.T) {
	const ranks = 3
	type badCase struct {
		name       string
		rows, cols int
		a          func(full []float64) []float64 // root's slice from a full-size one
		edges      bool                           // the grid with a wrong edge tile, not the 12 x 10 one
		cols2      int                            // rank 2's cols when not 0
		is         error
		want       string
	}
	full := func(a []float64) []float64 { return a }
	cases := []badCase{
		{name: "rows not spanned", rows: 13, cols: 10, a: full, is: comm.ErrInvalidArg,
			want: "3 rows of tiles at most 4 rows high cover 9 to 12 rows, not the 13 of the 13 x 10 matrix"},
		{name: "rows short of the last tile row", rows: 8, cols: 10, a: full, is: comm.ErrInvalidArg,
			want: "cover 9 to 12 rows, not the 8 of the 8 x 10 matrix"},
		{name: "rows not a multiple", rows: 10, cols: 10, a: full, is: comm.ErrInvalidArg,
			want: `tile (2, 0), handle "M(2,0)" (#4, owner 1), is 4 x 5, not 2 x 5: a 10 x 10 matrix in a 3 x 2 grid of 4 x 5 tiles (the largest) has every tile 4 x 5 but the last row of tiles, 2 rows high, and the last column, 5 columns wide; register each edge tile at its own shape (dist.Register), or pick mb and nb that divide the matrix`},
		{name: "cols not spanned", rows: 12, cols: 11, a: full, is: comm.ErrInvalidArg,
			want: "2 columns of tiles (the widest row of the grid) at most 5 columns wide cover 6 to 10 columns, not the 11 of the 12 x 11 matrix"},
		{name: "cols not a multiple", rows: 12, cols: 8, a: full, is: comm.ErrInvalidArg,
			want: `tile (0, 1), handle "M(0,1)" (#1, owner 1), is 4 x 5, not 4 x 3`},
		{name: "nil on root", rows: 12, cols: 10, a: func([]float64) []float64 { return nil }, is: comm.ErrInvalidArg,
			want: "0 elements on root 1 for a 12 x 10 matrix"},
		{name: "short on root", rows: 12, cols: 10, a: func(a []float64) []float64 { return a[:12*10-1] }, is: comm.ErrInvalidArg,
			want: "119 elements on root 1 for a 12 x 10 matrix"},
		{name: "negative rows", rows: -12, cols: 10, a: full, is: comm.ErrInvalidArg, want: "a -12 x 10 matrix"},
		{name: "negative cols", rows: 12, cols: -1, a: full, is: comm.ErrInvalidArg, want: "a 12 x -1 matrix"},
		{name: "inner tile smaller", rows: 7, cols: 7, a: full, edges: true, is: comm.ErrInvalidArg,
			want: `tile (0, 0), handle "E(0,0)" (#6, owner 0), is 3 x 4, not 4 x 4`},
		{name: "ranks disagree", rows: 12, cols: 10, cols2: 11, a: full, is: comm.ErrMismatch,
			want: "rank 0 passed root 1 and a 12 x 10 matrix, rank 2 root 1 and a 12 x 11 one: every rank passes the same"},
	}
	calls := []string{"ScatterMatrix", "GatherMatrix"}
	errs := make([][ranks]error, len(cases)*len(calls)) // [case*2+call][rank]
	err := runRanks(t, ranks, func(ctx context.Context, d *dist.Scheduler) error {
		// A 3 x 2 grid of 4 x 5 tiles is a 12 x 10 matrix.
		tiles, err := dist.RegisterTiles[float64](d, 3, 2, 4, 5, dist.Cyclic1D(2, ranks), nil, scheduler.Named("M"))
		if err != nil {
			return err
		}
		// A 2 x 2 grid of 4 x 4 tiles and edge tiles for a 7 x 7
		// matrix, but its tile (0, 0) is 3 x 4.
		edges := make([][]*dist.Handle, 2)
		for i := range 2 {
			edges[i] = make([]*dist.Handle, 2)
			for j := range 2 {
				r, c := [2][2]int{{3, 4}, {3, 3}}[i][j], []int{4, 3}[j]
				var data []float64
				if d.Rank() == 0 {
					data = make([]float64, r*c)
				}
				if edges[i][j], err = dist.Register(d, 0, data, r, c, scheduler.Named(fmt.Sprintf("E(%d,%d)", i, j))); err != nil {
					return err
				}
			}
		}
		a := make([]float64, 12*10)
		for k, tc := range cases {
			in, grid, cols := []float64(nil), tiles, tc.cols
			if d.Rank() == 1 {
				in = tc.a(a)
			}
			if tc.edges {
				grid = edges
			}
			if d.Rank() == 2 && tc.cols2 != 0 {
				cols = tc.cols2
			}
			errs[2*k][d.Rank()] = dist.ScatterMatrix(ctx, d, 1, in, tc.rows, cols, grid)
			errs[2*k+1][d.Rank()] = dist.GatherMatrix(ctx, d, 1, in, tc.rows, cols, grid)
		}
		// Nothing was submitted: a good round trip still works.
		if d.Rank() == 1 {
			for k := range a {
				a[k] = float64(k)
			}
		}
		if err := dist.ScatterMatrix(ctx, d, 1, a, 12, 10, tiles); err != nil {
			return err
		}
		out := make([]float64, 12*10)
		if err := dist.GatherMatrix(ctx, d, 2, out, 12, 10, tiles); err != nil {
			return err
		}
		if d.Rank() == 2 {
			for k, v := range out {
				if v != float64(k) {
					return fmt.Errorf("after the bad calls, element %d came back as %v", k, v)
				}
			}
		}
		return d.WaitAll(ctx)
	})
	require.NoError(t, err)
	for k, tc := range cases {
		for c, call := range calls {
			e := errs[2*k+c]
			for r := range ranks {
				if assert.Error(t, e[r], "%s, %s, rank %d", tc.name, call, r) {
					assert.True(t, errors.Is(e[r], tc.is), "%s, %s, rank %d: %v is not %v", tc.name, call, r, e[r], tc.is)
					assert.Contains(t, e[r].Error(), tc.want, "%s, %s, rank %d", tc.name, call, r)
					assert.Contains(t, e[r].Error(), "dist: "+call+": ", "%s, rank %d", tc.name, r)
					assert.Equal(t, e[0].Error(), e[r].Error(), "%s, %s: rank %d's error differs from rank 0's", tc.name, call, r)
				}
			}
		}
	}
}

// A complaint that only some ranks make (here rank 2 passes a grid of
// another element type) reaches every rank, naming the rank.
func TestScatterMatrixOneRankComplains(t *testing.T) {
	const ranks = 3
	var errs [ranks]error
	err := runRanks(t, ranks, func(ctx context.Context, d *dist.Scheduler) error {
		f64, err := dist.RegisterTiles[float64](d, 1, 2, 2, 3, dist.Cyclic1D(2, ranks), nil, scheduler.Named("F"))
		if err != nil {
			return err
		}
		i32, err := dist.RegisterTiles[int32](d, 1, 2, 2, 3, dist.Cyclic1D(2, ranks), nil, scheduler.Named("I"))
		if err != nil {
			return err
		}
		grid := f64
		if d.Rank() == 2 {
			grid = i32
		}
		errs[d.Rank()] = dist.ScatterMatrix(ctx, d, 0, make([]float64, 2*6), 2, 6, grid)
		return d.WaitAll(ctx)
	})
	require.NoError(t, err)
	for r := range ranks {
		require.ErrorIs(t, errs[r], comm.ErrInvalidArg, "rank %d", r)
		assert.Contains(t, errs[r].Error(), `rank 2: handle "I(0,0)" (#2, owner 0) holds int32, the matrix float64`, "rank %d", r)
	}
	for r := range ranks {
		assert.Equal(t, errs[0].Error(), errs[r].Error(), "rank %d's error differs from rank 0's", r)
	}
}
