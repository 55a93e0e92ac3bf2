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
// i*b.. and columns j*b.. of a, b x b; a nil tile is skipped) and sends
// each to its owner. It is collective.
func ScatterMatrix[T comm.Number](ctx context.Context, d *Scheduler, root int, a []T, n int, tiles [][]*Handle) error {
	return moveMatrix(ctx, d, "ScatterMatrix", root, a, n, tiles, true)
}

// GatherMatrix assembles the tiles into the n x n row-major matrix a on
// root (a is ignored elsewhere); it is ScatterMatrix reversed.
func GatherMatrix[T comm.Number](ctx context.Context, d *Scheduler, root int, a []T, n int, tiles [][]*Handle) error {
	return moveMatrix(ctx, d, "GatherMatrix", root, a, n, tiles, false)
}

// moveMatrix is ScatterMatrix (toTiles) and GatherMatrix: the same walk
// over the tiles, copying rows one way or the other on root.
func moveMatrix[T comm.Number](ctx context.Context, d *Scheduler, call string, root int, a []T, n int, tiles [][]*Handle, toTiles bool) error {
	hs, at := flatten(tiles)
	if d.rank == root && len(a) < n*n {
		return fmt.Errorf("dist: %s: %w: %d elements for a %d x %d matrix", call, comm.ErrInvalidArg, len(a), n, n)
	}
	move := d.Gather
	if toTiles {
		move = d.Scatter
	}
	return move(ctx, root, hs, func(k int, data any) error {
		t, ok := data.([]T)
		if !ok {
			return fmt.Errorf("%w: holds %T, not []%T", comm.ErrInvalidArg, data, *new(T))
		}
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
