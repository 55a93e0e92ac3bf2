package dist

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/scheduler"
)

// Scatter sets every handle of hs from rank root: fill runs once, on root,
// with each handle's memory there (fill(i, data) for hs[i]; data is a []T),
// and then each handle goes to its owner. It is collective: every rank
// calls it with the same root and handles; fill is called on root only.
// It returns once the owners hold the data (it ends with WaitAll). The
// ranks first exchange their roots: ranks that pass different roots get
// comm.ErrMismatch, and a root outside [0, Size()) ErrBadRank, on every
// rank and before anything is submitted. Before that the call is compared
// with the other ranks' graphs as a submission ("dist.Scatter"): where a
// rank submitted a task or called WaitAll instead, every rank gets
// ErrGraphMismatch naming both.
//
// A call that fails in that comparison or in the exchange of roots -
// this rank's context ends, or the stall timeout (WithStallTimeout)
// passes while another rank does not come - fails the graph: this rank
// leaves it, as a rank that leaves WaitAll does, and the other ranks
// hear why before it gives the exchange up. Then Submit, WaitAll and the
// collective calls return that failure at once, on every rank, and
// Close, the failure told, does not return it again. The same holds for
// Gather, ScatterMatrix and GatherMatrix.
func (d *Scheduler) Scatter(ctx context.Context, root int, hs []*Handle, fill func(i int, data any) error) error {
	before := d.failure()
	return d.reply(before, d.onRoot(ctx, "Scatter", root, hs, scheduler.ModeW, fill))
}

// Gather reads every handle of hs on rank root: once each handle's latest
// version has reached root, use runs there with each one's memory
// (use(i, data) for hs[i]). It is collective, like Scatter, with the same
// checks of root; use is called on root only. It ends with WaitAll.
func (d *Scheduler) Gather(ctx context.Context, root int, hs []*Handle, use func(i int, data any) error) error {
	before := d.failure()
	return d.reply(before, d.onRoot(ctx, "Gather", root, hs, scheduler.ModeR, use))
}

// onRoot agrees on root with the other ranks, then runs fn there
// (runOnRoot).
func (d *Scheduler) onRoot(ctx context.Context, call string, root int, hs []*Handle, mode scheduler.Mode, fn func(int, any) error) error {
	if err := d.compareFirst(ctx, call); err != nil {
		return d.settled(fmt.Errorf("dist: %s: %w", call, err))
	}
	// Every rank learns every root before any returns: a rank that
	// refused its root alone would leave the others waiting in WaitAll
	// for a task it never submits.
	if f := d.beforeExchange.Load(); f != nil {
		(*f)()
	}
	xctx, stop := d.exchangeBound(ctx, call)
	roots, err := comm.AllGatherValues(xctx, d.c, root)
	stop()
	if err != nil {
		return d.exchangeFailed(call, err)
	}
	if err := d.agreeRoot(roots); err != nil {
		return fmt.Errorf("dist: %s: %w", call, err)
	}
	return d.runOnRoot(ctx, call, root, hs, mode, fn)
}

// compareFirst records call (Scatter, Gather, ScatterMatrix,
// GatherMatrix) as a submission of the program's, "dist.Gather", and
// compares the ranks' graphs up to it, as WaitAll does before it waits.
// Without it, a rank that called it while another went on submitting
// tasks - ranks that decided apart whether to take another step, each
// from a residual of its own - waited in the exchange of arguments while
// the other waited in a comparison of the graphs, each for a collective
// the other never makes, until the stall timeout (10 minutes under
// runtimeview) ended both with ErrStalled. Now the comparison meets the
// other rank's and every rank gets ErrGraphMismatch naming the call and
// the task the other rank submitted instead. d.mu is not held.
func (d *Scheduler) compareFirst(ctx context.Context, call string) error {
	if d.size == 1 {
		return nil
	}
	// Hear of the departures already delivered first, as WaitAll does.
	d.prog.sync()
	d.mu.Lock()
	defer d.mu.Unlock()
	name := "dist." + call
	switch {
	case d.closing.Load() && !d.closed:
		return fmt.Errorf("%w: Close was called on this rank (from another goroutine?) while its program was still submitting", ErrClosed)
	case d.closed:
		return ErrClosed
	}
	if err := d.failure(); err != nil {
		return err
	}
	if err := d.check.diverged; err != nil {
		return err
	}
	if err := d.recordLocked(ctx, call, submission{codelet: name, onRank: -1}); err != nil {
		return err
	}
	err := d.check.flush(ctx, d.c)
	if err == nil {
		// A rank whose call failed here (its context ended) records the
		// failure, which the others hear: their wait ends with it.
		gctx, stop := d.untilGraphFails(ctx)
		err = d.check.settle(gctx, d.c)
		stop()
	}
	if err == nil && ctx.Err() != nil {
		// The comparison ended (the others had joined it) although
		// ctx had: this rank stops here, as if it had failed in it,
		// rather than give up the exchange of arguments that follows,
		// which broke the communicator under the others (they got
		// comm.ErrBroken instead of this rank's stop).
		err = context.Cause(ctx)
	}
	if err != nil {
		switch stopped := d.interrupted(ctx, name, err); {
		case stopped != nil:
			// This rank stopped here: it never joins the exchange of
			// arguments that the others wait in (interrupted recorded
			// the failure in its own words).
			d.quitLocked(call, stopped, "")
		case errors.Is(err, ErrStalled) && d.check.diverged == nil:
			// A rank never came to the comparison: this rank gives it
			// up, and does not start another that the others would
			// pair with it (a later WaitAll here compared the graphs
			// again, and waited another stall timeout).
			d.quitLocked(call, err, "")
		default:
			d.fail(err, "")
		}
		return err
	}
	return nil
}

// exchangeBound bounds the exchange of call's arguments by ctx, by the
// stall timeout and by the graph's failure: a rank whose call failed in
// compareFirst (its context ended) never joins the exchange, but records
// the failure, which the others hear. Without it they waited in the
// exchange until the stall timeout (for ever with dist.New alone).
//
// When ctx ends or the stall timeout passes, the failure is recorded as
// the graph's and this rank leaves the graph (quitLocked: the others
// hear it) before the exchange ends: the exchange's own error was
// returned to the program, and recorded nowhere. Then this rank's
// Submit went on into a graph the others had given up, its WaitAll and
// Close compared the graphs again (over a communicator the abandoned
// exchange had broken, or, under MPI, for the others to wait for until
// the stall timeout, as they heard nothing), and the other ranks'
// errors named a broken communicator rather than why. Recording it
// after the exchange ended would come too late under MPI: abandoning a
// collective breaks the communicator there, and the news could no
// longer be sent. The returned function releases the context; once it
// is called, nothing is recorded.
func (d *Scheduler) exchangeBound(ctx context.Context, call string) (context.Context, func()) {
	// Not derived from ctx: the exchange ends only once its failure has
	// been recorded.
	xctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	var mu sync.Mutex
	over := false
	end := func(record func() error) {
		mu.Lock()
		defer mu.Unlock()
		if over {
			return
		}
		over = true
		cancel(record())
	}
	stopCtx := context.AfterFunc(ctx, func() {
		end(func() error {
			d.mu.Lock()
			defer d.mu.Unlock()
			stopped := d.interrupted(ctx, "dist."+call, context.Cause(ctx))
			d.quitLocked(call, stopped, "")
			return stopped
		})
	})
	stopTimer := func() bool { return true }
	if d.timeout > 0 {
		t := time.AfterFunc(d.timeout, func() {
			end(func() error {
				err := fmt.Errorf("%w: rank %d waited %v for the other ranks to call %s (a rank went on without it, or is stuck)", ErrStalled, d.rank, d.timeout, call)
				d.mu.Lock()
				defer d.mu.Unlock()
				d.quitLocked(call, err, "")
				return err
			})
		})
		stopTimer = t.Stop
	}
	stopGraph := context.AfterFunc(d.graph, func() {
		end(func() error { return context.Cause(d.graph) })
	})
	return xctx, func() {
		mu.Lock()
		over = true
		mu.Unlock()
		stopCtx()
		stopTimer()
		stopGraph()
		cancel(nil)
	}
}

// exchangeFailed is call's error when its exchange of arguments failed
// with err: the graph's failure, which exchangeBound recorded before it
// ended the exchange (this rank's context ended, the stall timeout) or
// which this rank heard of (the other ranks' news, the failure of a
// task of the graph); else err, a failure of the communicator, with
// which this rank leaves the graph (quitLocked). It returns once the
// receives the failure canceled have ended.
func (d *Scheduler) exchangeFailed(call string, err error) error {
	if errors.Is(err, comm.ErrBroken) {
		// A rank that left said so before its return (in process) or
		// its abandoned exchange broke the communicator: hear it.
		d.prog.sync()
	}
	if f := d.failure(); f != nil {
		return d.settled(fmt.Errorf("dist: %s on rank %d: %w", call, d.rank, f))
	}
	here := ""
	if !errors.Is(err, comm.ErrBroken) {
		// A failure of this rank's, not a consequence of another's.
		here = fmt.Sprintf("%s: exchanging the arguments: %v", call, err)
	}
	err = fmt.Errorf("dist: rank %d: %s: exchanging the arguments: %w", d.rank, call, rankFailed(err))
	d.mu.Lock()
	d.quitLocked(call, err, here)
	d.mu.Unlock()
	return d.settled(err)
}

// settled returns err once the receives a failure of the graph canceled
// have ended (awaitCanceled; at once without a failure), as WaitAll
// does, so that no buffer changes after the call that returns err.
func (d *Scheduler) settled(err error) error {
	if aerr := d.awaitCanceled(); aerr != nil {
		return fmt.Errorf("%w (and %v)", err, aerr)
	}
	return err
}

// untilGraphFails returns ctx, ending as well, with the failure as its
// cause, once the graph fails (d.graph), and the function that releases
// it.
func (d *Scheduler) untilGraphFails(ctx context.Context) (context.Context, func()) {
	gctx, cancel := context.WithCancelCause(ctx)
	unwatch := context.AfterFunc(d.graph, func() { cancel(context.Cause(d.graph)) })
	return gctx, func() {
		unwatch()
		cancel(nil)
	}
}

// agreeRoot turns every rank's root into one error, the same on every
// rank: ranks that passed different roots (comm.ErrMismatch), else a
// root outside the ranks (ErrBadRank); nil when they agree on a rank.
func (d *Scheduler) agreeRoot(roots []int) error {
	for r, root := range roots[1:] {
		if root != roots[0] {
			return fmt.Errorf("%w: rank 0 passed root %d, rank %d root %d: every rank passes the same%s",
				comm.ErrMismatch, roots[0], r+1, root, d.outside(roots))
		}
	}
	if root := roots[0]; root < 0 || root >= d.size {
		return fmt.Errorf("%w: root %d of %d ranks", ErrBadRank, root, d.size)
	}
	return nil
}

// outside names the first of roots that is not a rank (" (rank 2's root
// 5 is not a rank of 3)"), or is "".
func (d *Scheduler) outside(roots []int) string {
	for r, root := range roots {
		if root < 0 || root >= d.size {
			return fmt.Sprintf(" (rank %d's root %d is not a rank of %d)", r, root, d.size)
		}
	}
	return ""
}

// runOnRoot runs fn on root, which every rank agreed on, in one task
// accessing every handle in mode, then waits for the whole graph.
func (d *Scheduler) runOnRoot(ctx context.Context, call string, root int, hs []*Handle, mode scheduler.Mode, fn func(int, any) error) error {
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

// ScatterMatrix cuts the rows x cols row-major matrix a, which only root
// needs to pass (nil elsewhere), into the grid of tiles and sends each
// tile to its owner; rows, cols and the tiles describe the matrix as a
// ScaLAPACK descriptor does an M x N matrix in MB x NB blocks. It is
// collective: every rank calls it with the same root, rows, cols and
// tiles, and it returns once the owners hold their tiles (it ends with
// WaitAll).
//
// The tiles' shape mb x nb is that of the largest tile, and tiles[i][j]
// holds rows i*mb.. and columns j*nb.. of a. Every tile is mb x nb except
// those of the last row of tiles, which hold the rows left (rows -
// (len(tiles)-1)*mb, 1 to mb of them), and those of the last column,
// which hold the columns left: a matrix that is not a multiple of the
// tile shape is cut as ScaLAPACK cuts it, with edge tiles registered at
// their own shape (RegisterMatrixTiles registers such a grid; Register,
// one tile at a time, any other). A nil tile is skipped, and a row of
// tiles may be shorter than the widest, as a triangle's; the widest row
// spans the columns.
//
// The tiles must span the matrix exactly, hold T, and, on root, len(a)
// must be at least rows*cols: otherwise (negative sizes included), every
// rank returns the same error, wrapping comm.ErrInvalidArg, and nothing
// is submitted. Ranks that pass different sizes or roots get
// comm.ErrMismatch, and a root outside [0, Size()) ErrBadRank, also on
// every rank; a complaint that only some ranks make (their tiles differ)
// names the first of them. As with Scatter, the call is first compared
// with the other ranks' graphs as a submission ("dist.ScatterMatrix"),
// so that a rank that submitted a task or called WaitAll instead gets
// ErrGraphMismatch, on every rank. RegisterMatrixTiles registers the grid
// of tiles of a rows x cols matrix in this layout.
func ScatterMatrix[T comm.Number](ctx context.Context, d *Scheduler, root int, a []T, rows, cols int, tiles [][]*Handle) error {
	before := d.failure()
	return d.reply(before, moveMatrix(ctx, d, "ScatterMatrix", root, a, rows, cols, tiles, true))
}

// GatherMatrix assembles the tiles into the rows x cols row-major matrix
// a on root (a is ignored elsewhere); it is ScatterMatrix reversed, with
// the same tile layout and checks. Elements of a that no tile covers (nil
// tiles, the part of a triangle's grid beyond a short row) are left as
// they were.
func GatherMatrix[T comm.Number](ctx context.Context, d *Scheduler, root int, a []T, rows, cols int, tiles [][]*Handle) error {
	before := d.failure()
	return d.reply(before, moveMatrix(ctx, d, "GatherMatrix", root, a, rows, cols, tiles, false))
}

// matrixCall is what a rank passed to ScatterMatrix or GatherMatrix and
// what it found wrong with it ("" when nothing), exchanged so that every
// rank returns the same error.
type matrixCall struct {
	Root, Rows, Cols int
	Bad              string
}

// moveMatrix is ScatterMatrix (toTiles) and GatherMatrix: the same walk
// over the tiles, copying rows one way or the other on root.
func moveMatrix[T comm.Number](ctx context.Context, d *Scheduler, call string, root int, a []T, rows, cols int, tiles [][]*Handle, toTiles bool) error {
	hs, at := flatten(tiles)
	shape, bad := checkCover(tiles, hs, rows, cols, comm.DatatypeOf[T]())
	// Only root knows a: it tells the others whether it fits.
	if bad == "" && d.rank == root && len(a) < rows*cols {
		bad = fmt.Sprintf("%d elements on root %d for a %d x %d matrix", len(a), root, rows, cols)
	}
	if err := d.compareFirst(ctx, call); err != nil {
		return d.settled(fmt.Errorf("dist: %s: %w", call, err))
	}
	// Every rank learns what every other passed and found, the root
	// included, so that they all return the same error instead of some
	// waiting for a task the others never submit.
	if f := d.beforeExchange.Load(); f != nil {
		(*f)()
	}
	xctx, stop := d.exchangeBound(ctx, call)
	all, err := comm.AllGatherValues(xctx, d.c, matrixCall{Root: root, Rows: rows, Cols: cols, Bad: bad})
	stop()
	if err != nil {
		return d.exchangeFailed(call, err)
	}
	if err := d.agreeMatrix(all); err != nil {
		return fmt.Errorf("dist: %s: %w", call, err)
	}
	mode := scheduler.ModeR
	if toTiles {
		mode = scheduler.ModeW
	}
	return d.runOnRoot(ctx, call, root, hs, mode, func(k int, data any) error {
		t := data.([]T) // checkCover checked the type
		h := hs[k]
		r0, c0 := at[k][0]*shape.mb, at[k][1]*shape.nb
		for r := range h.rows {
			row := a[(r0+r)*cols+c0 : (r0+r)*cols+c0+h.cols]
			if toTiles {
				copy(t[r*h.cols:(r+1)*h.cols], row)
			} else {
				copy(row, t[r*h.cols:(r+1)*h.cols])
			}
		}
		return nil
	})
}

// agreeMatrix turns every rank's matrixCall into one error, the same on
// every rank: ranks that passed different arguments (comm.ErrMismatch),
// else a root outside the ranks (ErrBadRank), else the first complaint
// (comm.ErrInvalidArg), named by its rank unless every rank made it.
func (d *Scheduler) agreeMatrix(all []matrixCall) error {
	roots := make([]int, len(all))
	for r, m := range all {
		roots[r] = m.Root
	}
	for r, m := range all[1:] {
		if m.Root != all[0].Root || m.Rows != all[0].Rows || m.Cols != all[0].Cols {
			return fmt.Errorf("%w: rank 0 passed root %d and a %d x %d matrix, rank %d root %d and a %d x %d one: every rank passes the same%s",
				comm.ErrMismatch, all[0].Root, all[0].Rows, all[0].Cols, r+1, m.Root, m.Rows, m.Cols, d.outside(roots))
		}
	}
	if root := all[0].Root; root < 0 || root >= d.size {
		return fmt.Errorf("%w: root %d of %d ranks", ErrBadRank, root, d.size)
	}
	for r, m := range all {
		if m.Bad == "" {
			continue
		}
		for _, o := range all {
			if o.Bad != m.Bad {
				return fmt.Errorf("%w: rank %d: %s", comm.ErrInvalidArg, r, m.Bad)
			}
		}
		return fmt.Errorf("%w: %s", comm.ErrInvalidArg, m.Bad)
	}
	return nil
}

// A tileShape is the layout of a grid of tiles over a matrix: every tile
// is mb x nb but the last row's and column's, which hold the rest.
type tileShape struct{ mb, nb int }

// checkCover reports what keeps the tiles (hs, the non-nil ones) from
// spanning a rows x cols matrix of dt exactly ("" when nothing): tiles
// of one element type, len(tiles) rows of tiles and as many columns as
// the widest row has, every tile mb x nb (the largest tile's shape) but
// those of the last row and column, which hold the rows and columns left.
func checkCover(tiles [][]*Handle, hs []*Handle, rows, cols int, dt comm.Datatype) (tileShape, string) {
	if rows < 0 || cols < 0 {
		return tileShape{}, fmt.Sprintf("a %d x %d matrix", rows, cols)
	}
	var s tileShape
	for _, h := range hs {
		if h.dt != dt {
			return tileShape{}, fmt.Sprintf("%v holds %s, the matrix %s", h, h.dt, dt)
		}
		s.mb, s.nb = max(s.mb, h.rows), max(s.nb, h.cols)
	}
	if len(hs) == 0 {
		return s, "" // nothing to move
	}
	mt, nt := len(tiles), 0
	for _, row := range tiles {
		nt = max(nt, len(row))
	}
	// The last row (column) of tiles holds 1 to mb rows (nb columns).
	lastRows, lastCols := rows-(mt-1)*s.mb, cols-(nt-1)*s.nb
	if lastRows < 1 || lastRows > s.mb {
		return s, fmt.Sprintf("%d rows of tiles at most %d rows high cover %s rows, not the %d of the %d x %d matrix",
			mt, s.mb, span(mt, s.mb), rows, rows, cols)
	}
	if lastCols < 1 || lastCols > s.nb {
		return s, fmt.Sprintf("%d columns of tiles (the widest row of the grid) at most %d columns wide cover %s columns, not the %d of the %d x %d matrix",
			nt, s.nb, span(nt, s.nb), cols, rows, cols)
	}
	for i, row := range tiles {
		for j, h := range row {
			if h == nil {
				continue
			}
			wantRows, wantCols := s.mb, s.nb
			if i == mt-1 {
				wantRows = lastRows
			}
			if j == nt-1 {
				wantCols = lastCols
			}
			if h.rows != wantRows || h.cols != wantCols {
				return s, fmt.Sprintf("tile (%d, %d), %v, is %d x %d, not %d x %d: a %d x %d matrix in a %d x %d grid of %d x %d tiles (the largest) has every tile %d x %d but the last row of tiles, %d rows high, and the last column, %d columns wide; register each edge tile at its own shape (dist.Register), or pick mb and nb that divide the matrix; dist.RegisterMatrixTiles(d, %d, %d, %d, %d, ...) registers that grid",
					i, j, h, h.rows, h.cols, wantRows, wantCols, rows, cols, mt, nt, s.mb, s.nb, s.mb, s.nb, lastRows, lastCols, rows, cols, s.mb, s.nb)
			}
		}
	}
	return s, ""
}

// span says how many rows (or columns) n tiles at most b high cover:
// (n-1)*b+1 to n*b, as the last may be lower.
func span(n, b int) string {
	if n*b == (n-1)*b+1 {
		return fmt.Sprint(n * b)
	}
	return fmt.Sprintf("%d to %d", (n-1)*b+1, n*b)
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
