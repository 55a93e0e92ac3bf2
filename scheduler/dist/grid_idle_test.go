package dist_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// runRanksReporting is runRanks with every rank's report function
// (WithStallReport) sending to reports, tagged with the rank.
func runRanksReporting(t *testing.T, n int, reports chan<- string, fn func(ctx context.Context, d *dist.Scheduler) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	return local.Run(ctx, n, func(ctx context.Context, c comm.Comm) error {
		ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
		if err != nil {
			return err
		}
		defer ls.Close()
		rank := c.Rank()
		d, err := dist.New(ctx, c, ls, dist.WithStallReport(time.Hour, func(s string) {
			reports <- fmt.Sprintf("rank %d: %s", rank, s)
		}))
		if err != nil {
			return err
		}
		defer d.Close()
		return fn(ctx, d)
	})
}

// drain returns what ch holds now (every sender has returned).
func drain(ch chan string) []string {
	var out []string
	for {
		select {
		case s := <-ch:
			out = append(out, s)
		default:
			return out
		}
	}
}

// A process grid of one column (4 x 1) for a matrix of 2 x 8 tiles gave
// every tile to ranks 0 and 1 and left ranks 2 and 3 idle, in silence.
// Rank 0 now warns, naming the grid, the tiles, the idle ranks and a
// grid that fits; a grid that uses every rank says nothing, and a grid of
// more ranks than the job has is refused.
func TestBlockCyclic2DWarnsOfIdleRanks(t *testing.T) {
	cases := []struct {
		name       string
		p, q       int
		rows, cols int   // of the matrix, in tiles of 2 x 2
		owners     []int // the ranks that own tiles
		want       string
	}{
		{"one column", 4, 1, 2, 8, []int{0, 1}, `dist: RegisterMatrixTiles: the 4 x 1 process grid (BlockCyclic2D(4, 1)) leaves 2 ranks of 4 without a tile of "A" (2 x 8 tiles of a 4 x 16 matrix): ranks 2, 3 own none, so the tasks that write its tiles run on the other 2 ranks only; use BlockCyclic2D(2, 2), which gives every rank tiles of this matrix, or smaller tiles, so that the matrix has at least P tile rows and Q tile columns`},
		{"one row", 1, 4, 8, 3, []int{0, 1, 2}, `dist: RegisterMatrixTiles: the 1 x 4 process grid (BlockCyclic2D(1, 4)) leaves 1 rank of 4 without a tile of "A" (8 x 3 tiles of a 16 x 6 matrix): rank 3 owns none, so the tasks that write its tiles run on the other 3 ranks only; use BlockCyclic2D(2, 2), which gives every rank tiles of this matrix, or smaller tiles, so that the matrix has at least P tile rows and Q tile columns`},
		{"no grid fits", 2, 2, 1, 1, []int{0}, `dist: RegisterMatrixTiles: the 2 x 2 process grid (BlockCyclic2D(2, 2)) leaves 3 ranks of 4 without a tile of "A" (1 x 1 tiles of a 2 x 2 matrix): ranks 1, 2, 3 own none, so the tasks that write its tiles run on the other 1 rank only; use smaller tiles, so that the matrix has at least P tile rows and Q tile columns`},
		{"fits", 2, 2, 2, 2, []int{0, 1, 2, 3}, ""},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reports := make(chan string, 64)
			owned := make(chan int, 64)
			err := runRanksReporting(t, 4, reports, func(ctx context.Context, d *dist.Scheduler) error {
				a, err := dist.RegisterMatrixTiles[float64](d, 2*c.rows, 2*c.cols, 2, 2, dist.BlockCyclic2D(c.p, c.q), nil, scheduler.Named("A"))
				if err != nil {
					return err
				}
				if slices.ContainsFunc(slices.Concat(a...), func(h *dist.Handle) bool { return h.Owner() == d.Rank() }) {
					owned <- d.Rank()
				}
				return d.WaitAll(ctx)
			})
			require.NoError(t, err, "case %d", i)
			var owners []int
			for len(owned) > 0 {
				owners = append(owners, <-owned)
			}
			slices.Sort(owners)
			assert.Equal(t, c.owners, owners, "case %d: the ranks that own tiles", i)
			got := drain(reports)
			if c.want == "" {
				assert.Empty(t, got, "case %d", i)
				return
			}
			once := fmt.Sprintf(" (said once: later grids of %d x %d tiles on this process grid leave the same ranks idle)", c.rows, c.cols)
			assert.Equal(t, []string{"rank 0: " + c.want + once}, got, "case %d: one warning, from rank 0", i)
		})
	}

	t.Run("more ranks than the job", func(t *testing.T) {
		reports := make(chan string, 64)
		err := runRanksReporting(t, 2, reports, func(ctx context.Context, d *dist.Scheduler) error {
			_, err := dist.RegisterMatrixTiles[float64](d, 8, 8, 2, 2, dist.BlockCyclic2D(4, 1), nil)
			return err
		})
		require.ErrorIs(t, err, dist.ErrDistribution)
		assert.Contains(t, err.Error(), "a 4 x 1 process grid for 2 ranks: P*Q must equal the rank count")
		assert.Empty(t, drain(reports))
	})
}

// A 2D stencil registers several grids of one tile layout: the plate in
// two generations and each generation's four halos (a row halo grid is
// an mt x n matrix in 1 x b tiles). On a grid that left a rank idle, rank
// 0 warned once per grid: 10 identical warnings in a new user's heat
// solver, the halos' advising "smaller tiles" for tiles one row high. It
// now warns once per tile grid and process grid, and again for a grid of
// other tiles.
func TestIdleWarningOncePerLayout(t *testing.T) {
	reports := make(chan string, 64)
	err := runRanksReporting(t, 3, reports, func(ctx context.Context, d *dist.Scheduler) error {
		g := dist.BlockCyclic2D(1, 3)
		for _, name := range []string{"T0", "T1"} {
			if _, err := dist.RegisterMatrixTiles[float64](d, 100, 100, 64, 64, g, nil, scheduler.Named(name)); err != nil {
				return err
			}
			if _, err := dist.RegisterMatrixTiles[float64](d, 2, 100, 1, 64, g, nil, scheduler.Named(name+"N")); err != nil {
				return err
			}
			if _, err := dist.RegisterTiles[float64](d, 2, 2, 1, 1, g, nil, scheduler.Named(name+"change")); err != nil {
				return err
			}
		}
		// Another tile grid: warned of too.
		if _, err := dist.RegisterTiles[float64](d, 1, 1, 4, 4, g, nil, scheduler.Named("one")); err != nil {
			return err
		}
		return d.WaitAll(ctx)
	})
	require.NoError(t, err)
	got := drain(reports)
	require.Len(t, got, 2, "one warning per tile grid: %q", got)
	assert.Contains(t, got[0], `rank 0: dist: RegisterMatrixTiles: the 1 x 3 process grid (BlockCyclic2D(1, 3)) leaves 1 rank of 3 without a tile of "T0" (2 x 2 tiles of a 100 x 100 matrix)`)
	assert.Contains(t, got[0], "(said once: later grids of 2 x 2 tiles on this process grid leave the same ranks idle)")
	assert.Contains(t, got[1], `rank 0: dist: RegisterTiles: the 1 x 3 process grid (BlockCyclic2D(1, 3)) leaves 2 ranks of 3 without a tile of "one" (1 x 1 tiles`)
}
