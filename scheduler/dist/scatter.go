package dist

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/scheduler"
)

// Scatter sets every handle of hs from rank root: fill runs once, on root,
// with each handle's memory there (fill(i, data) for hs[i]; data is a []T),
// and then each handle goes to its owner. It is collective: every rank
// calls it with the same handles; fill is called on root only. It returns
// once the owners hold the data (it ends with WaitAll).
func (d *Scheduler) Scatter(ctx context.Context, root int, hs []*Handle, fill func(i int, data any) error) error {
	return d.onRoot(ctx, "Scatter", root, hs, scheduler.ModeW, fill)
}

// Gather reads every handle of hs on rank root: once each handle's latest
// version has reached root, use runs there with each one's memory
// (use(i, data) for hs[i]). It is collective, like Scatter; use is called
// on root only. It ends with WaitAll.
func (d *Scheduler) Gather(ctx context.Context, root int, hs []*Handle, use func(i int, data any) error) error {
	return d.onRoot(ctx, "Gather", root, hs, scheduler.ModeR, use)
}

// onRoot runs fn on root in one task accessing every handle in mode, then
// waits for the whole graph.
func (d *Scheduler) onRoot(ctx context.Context, call string, root int, hs []*Handle, mode scheduler.Mode, fn func(int, any) error) error {
	if root < 0 || root >= d.size {
		return fmt.Errorf("dist: %s: %w: root %d of %d ranks", call, ErrBadRank, root, d.size)
	}
	args := make([]Arg, 0, len(hs)+1)
	args = append(args, OnRank(root))
	for _, h := range hs {
		args = append(args, Arg{h: h, mode: mode})
	}
	cl := &scheduler.Codelet{Name: "dist." + call, CPU: func(c *scheduler.Call) error {
		for i := range hs {
			if err := fn(i, c.Data(i)); err != nil {
				return fmt.Errorf("%v: %w", hs[i], err)
			}
		}
		return nil
	}}
	if err := d.Submit(ctx, cl, args...); err != nil {
		return fmt.Errorf("dist: %s: %w", call, err)
	}
	if err := d.WaitAll(ctx); err != nil {
		return fmt.Errorf("dist: %s: %w", call, err)
	}
	return nil
}

// ScatterMatrix cuts the n x n row-major matrix a, which only root needs to
// pass (nil elsewhere), into the tiles of grid (tiles[i][j] holds rows
// i*mb.. and columns j*nb.. of a, every tile mb x nb; a nil tile is
// skipped; a row may be shorter, as a triangle's) and sends each to its
// owner. It is collective. The tiles must span the matrix exactly
// (len(tiles)*mb == n, and n/nb tiles in the longest row) and hold T: otherwise, or when root's a is shorter than n*n, every
// rank gets the same error (comm.ErrInvalidArg) and nothing is submitted.
func ScatterMatrix[T comm.Number](ctx context.Context, d *Scheduler, root int, a []T, n int, tiles [][]*Handle) error {
	return moveMatrix(ctx, d, "ScatterMatrix", root, a, n, tiles, true)
}

// GatherMatrix assembles the tiles into the n x n row-major matrix a on
// root (a is ignored elsewhere); it is ScatterMatrix reversed, with the
// same checks.
func GatherMatrix[T comm.Number](ctx context.Context, d *Scheduler, root int, a []T, n int, tiles [][]*Handle) error {
	return moveMatrix(ctx, d, "GatherMatrix", root, a, n, tiles, false)
}

// moveMatrix is ScatterMatrix (toTiles) and GatherMatrix: the same walk
// over the tiles, copying rows one way or the other on root.
func moveMatrix[T comm.Number](ctx context.Context, d *Scheduler, call string, root int, a []T, n int, tiles [][]*Handle, toTiles bool) error {
	if root < 0 || root >= d.size {
		return fmt.Errorf("dist: %s: %w: root %d of %d ranks", call, ErrBadRank, root, d.size)
	}
	hs, at := flatten(tiles)
	if err := checkCover(tiles, hs, n, comm.DatatypeOf[T]()); err != nil {
		return fmt.Errorf("dist: %s: %w", call, err)
	}
	// Only root knows a: it tells the others whether it fits, so that
	// every rank returns the same error instead of the others waiting
	// for a task root never submits.
	short := ""
	if d.rank == root && len(a) < n*n {
		short = fmt.Sprintf("%d elements on root %d for a %d x %d matrix", len(a), root, n, n)
	}
	short, err := comm.BcastValue(ctx, d.c, short, root)
	if err != nil {
		return fmt.Errorf("dist: %s: %w", call, err)
	}
	if short != "" {
		return fmt.Errorf("dist: %s: %w: %s", call, comm.ErrInvalidArg, short)
	}
	move := d.Gather
	if toTiles {
		move = d.Scatter
	}
	return move(ctx, root, hs, func(k int, data any) error {
		t := data.([]T) // checkCover checked the type
		h := hs[k]
		i, j := at[k][0], at[k][1]
		for r := range h.rows {
			row := a[(i*h.rows+r)*n+j*h.cols : (i*h.rows+r)*n+(j+1)*h.cols]
			if toTiles {
				copy(t[r*h.cols:(r+1)*h.cols], row)
			} else {
				copy(row, t[r*h.cols:])
			}
		}
		return nil
	})
}

// checkCover reports whether the tiles (hs, the non-nil ones) span an
// n x n matrix of dt exactly: one tile shape, len(tiles) rows of tiles
// filling n rows, and rows of tiles no wider than n columns, the widest
// filling them.
func checkCover(tiles [][]*Handle, hs []*Handle, n int, dt comm.Datatype) error {
	if n < 0 {
		return fmt.Errorf("%w: a %d x %d matrix", comm.ErrInvalidArg, n, n)
	}
	if len(hs) == 0 {
		return nil
	}
	mb, nb := hs[0].rows, hs[0].cols
	for _, h := range hs {
		if h.dt != dt {
			return fmt.Errorf("%w: %v holds %s, the matrix %s", comm.ErrInvalidArg, h, h.dt, dt)
		}
		if h.rows != mb || h.cols != nb {
			return fmt.Errorf("%w: %v is %d x %d, %v is %d x %d: the tiles of a matrix have one shape", comm.ErrInvalidArg, h, h.rows, h.cols, hs[0], mb, nb)
		}
	}
	if len(tiles)*mb != n {
		return fmt.Errorf("%w: %d rows of %d x %d tiles cover %d rows, not the %d of the %d x %d matrix", comm.ErrInvalidArg, len(tiles), mb, nb, len(tiles)*mb, n, n, n)
	}
	widest := 0
	for i, row := range tiles {
		if len(row)*nb > n {
			return fmt.Errorf("%w: row %d of the tiles has %d tiles of %d columns, %d columns, more than the %d of the %d x %d matrix", comm.ErrInvalidArg, i, len(row), nb, len(row)*nb, n, n, n)
		}
		widest = max(widest, len(row))
	}
	if widest*nb != n {
		return fmt.Errorf("%w: the widest row of the tiles has %d tiles of %d columns, %d columns, not the %d of the %d x %d matrix", comm.ErrInvalidArg, widest, nb, widest*nb, n, n, n)
	}
	return nil
}

// flatten lists the non-nil tiles of a grid with their positions.
func flatten(tiles [][]*Handle) ([]*Handle, [][2]int) {
	var hs []*Handle
	var at [][2]int
	for i, row := range tiles {
		for j, h := range row {
			if h != nil {
				hs = append(hs, h)
				at = append(at, [2]int{i, j})
			}
		}
	}
	return hs, at
}
