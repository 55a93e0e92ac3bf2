package dist

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/scheduler"
)

// The submissions Unregister and Flush record in the graph check, as
// mismatches name them.
const (
	unregisterName = "dist.unregister"
	flushName      = "dist.cache-flush"
)

// Unregister releases h on every rank, as StarPU-MPI's
// starpu_data_unregister: every rank calls it at the same point of its
// submission sequence, like Submit (the graph check sees a submission
// "dist.unregister" that reads and writes h, so a rank that unregisters
// h at another point, or not at all, is a graph mismatch naming it).
//
// A reduction of h in progress is combined first, and h's latest
// version goes back to its owner if another rank wrote it, as WaitAll
// does. Then each rank that has a copy of h waits for its tasks and
// transfers on h (not for the rest of the graph) and releases the
// copy: a non-owner drops its cached copy (the memory is the garbage
// collector's), and on the owner Unregister returns its data - the
// slice it registered, holding h's latest version - and nil elsewhere.
// A rank that has no copy of h returns at once. The wait is bounded: by
// ctx, by the graph's failure (Unregister then returns it, as WaitAll
// would), and by the stall timeout (WithStallTimeout). A failure during
// the wait, or a wait that gives up, fails the graph.
//
// Afterwards Submit, Update, Scatter and Gather refuse h, on every rank,
// with an error wrapping comm.ErrInvalidArg that names h and the
// submission that unregistered it; Data returns nil, Fetch an error.
// h's number is never given to another handle, so that numbers stay
// the same on every rank; what the scheduler keeps of h is freed, so a
// long program may register and unregister temporaries without growing.
//
// A nil handle, one of another scheduler (ErrForeignHandle) or one
// already unregistered is refused on the calling rank, with an error
// wrapping comm.ErrInvalidArg, before the graph check: ranks that all
// pass the same bad handle still submit one graph.
func (d *Scheduler) Unregister(ctx context.Context, h *Handle) (data any, err error) {
	before := d.failure()
	defer func() { err = d.reply(before, err) }()
	if err := d.refuse("Unregister", h); err != nil {
		return nil, err
	}
	d.mu.Lock()
	if err := d.admitLocked("Unregister", h); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	sub := submission{codelet: unregisterName, access: []accessDesc{describeAccess(h, scheduler.ModeRW)}, onRank: -1}
	if err := d.recordLocked(ctx, "Unregister", sub); err != nil {
		d.mu.Unlock()
		return nil, fmt.Errorf("dist: Unregister of %v: %w", h, err)
	}
	// Marked first: every rank has, whatever the walk below meets.
	h.gone, h.goneAt = true, d.check.n-1
	werr := error(nil)
	if h.phase != nil {
		werr = d.endReduxLocked(ctx, h)
	}
	if werr == nil && h.writer != h.owner && !h.holds(h.owner) {
		werr = d.transferLocked(ctx, h, h.writer, h.owner)
	}
	// What this rank keeps of h goes: its copy, its reduction's partial
	// results (their ids sorted, for a walk the same on every rank).
	drop := []*Handle{h}
	for _, r := range slices.Sorted(maps.Keys(h.partials)) {
		drop = append(drop, h.partials[r])
	}
	var lhs []*scheduler.Handle
	own := -1 // the index in lhs of the owner's handle of h
	for _, x := range drop {
		if x.local != nil {
			if x == h && d.rank == h.owner {
				own = len(lhs)
			}
			lhs = append(lhs, x.local)
		}
		x.local, x.data = nil, nil
		x.phase, x.partials = nil, nil
		d.forgetLocked(x)
	}
	d.mu.Unlock()
	what := fmt.Sprintf("Unregister of %v", h)
	if werr != nil {
		// The walk could not submit what h's release needs here (the
		// local scheduler refused, ctx ended): the graph cannot go on.
		err := fmt.Errorf("dist: rank %d: %s: %w", d.rank, what, werr)
		d.fail(err, fmt.Sprintf("%s: %v", what, werr))
		return nil, err
	}
	out, err := d.release(ctx, what, lhs)
	if err != nil {
		return nil, err
	}
	if own >= 0 {
		return out[own], nil
	}
	return nil, nil
}

// Flush drops the cached copies of h, as StarPU-MPI's
// starpu_mpi_cache_flush: afterwards one rank holds h's latest version -
// its owner if the owner's memory holds it (after WaitAll, or when the
// owner wrote it last), else the rank that wrote it - and the next task
// that reads h on any other rank receives it again. The owner keeps its
// memory, which is h's home, not a cache: a stale version there is
// known as such, and WaitAll or Unregister bring the latest version
// back. Every rank calls Flush at the same point of its submission
// sequence, like Submit (the graph check sees a submission
// "dist.cache-flush" that reads h). h stays registered.
//
// A rank that drops a copy first waits for its tasks and transfers on
// the copy, bounded as Unregister's wait is; the memory is then the
// garbage collector's. It is how a long program keeps what each rank
// caches of data that it read once and will not read again soon. Bad
// input is refused as by Unregister.
func (d *Scheduler) Flush(ctx context.Context, h *Handle) (err error) {
	before := d.failure()
	defer func() { err = d.reply(before, err) }()
	if err := d.refuse("Flush", h); err != nil {
		return err
	}
	d.mu.Lock()
	if err := d.admitLocked("Flush", h); err != nil {
		d.mu.Unlock()
		return err
	}
	sub := submission{codelet: flushName, access: []accessDesc{describeAccess(h, scheduler.ModeR)}, onRank: -1}
	if err := d.recordLocked(ctx, "Flush", sub); err != nil {
		d.mu.Unlock()
		return fmt.Errorf("dist: Flush of %v: %w", h, err)
	}
	if h.phase == nil && h.holds(h.owner) {
		// The owner's memory holds the latest version: every other
		// copy, the writer's included, is a cache. (During a reduction
		// the writer's copy is the one its contributions go into.)
		h.writer = h.owner
	}
	h.only(h.writer)
	var lhs []*scheduler.Handle
	if d.rank != h.writer && d.rank != h.owner && h.local != nil {
		lhs = append(lhs, h.local)
		h.local, h.data = nil, nil
	}
	d.mu.Unlock()
	_, err = d.release(ctx, fmt.Sprintf("Flush of %v", h), lhs)
	return err
}

// refuse returns the error for a handle that no rank could release: nil,
// or of another scheduler.
func (d *Scheduler) refuse(call string, h *Handle) error {
	switch {
	case h == nil:
		return fmt.Errorf("dist: %s: %w: nil handle", call, comm.ErrInvalidArg)
	case h.d != d:
		return fmt.Errorf("dist: %s: %w: %w: %v was registered with another distributed scheduler", call, comm.ErrInvalidArg, ErrForeignHandle, h)
	}
	return nil
}

// admitLocked returns why call cannot go on with h: the scheduler is
// closed or failed, or h was unregistered. d.mu is held.
func (d *Scheduler) admitLocked(call string, h *Handle) error {
	if d.closed || d.closing.Load() {
		return fmt.Errorf("dist: %s of %v: %w", call, h, ErrClosed)
	}
	if err := h.usableLocked(); err != nil {
		return fmt.Errorf("dist: %s: %w", call, err)
	}
	if err := d.failure(); err != nil {
		return fmt.Errorf("dist: %s of %v: %w", call, h, err)
	}
	return nil
}

// usableLocked returns why h cannot be used (it was unregistered), or
// nil. d.mu is held.
func (h *Handle) usableLocked() error {
	if h.gone {
		return fmt.Errorf("%w: %v was unregistered at submission #%d; register the data again for a new handle", comm.ErrInvalidArg, h, h.goneAt)
	}
	return nil
}

// forgetLocked removes h from the live handles. d.mu is held.
func (d *Scheduler) forgetLocked(h *Handle) {
	if i, ok := slices.BinarySearchFunc(d.handles, h.id, func(x *Handle, id int) int { return x.id - id }); ok {
		d.handles = slices.Delete(d.handles, i, i+1)
	}
}

// release unregisters lhs, this rank's copies that Unregister or Flush
// (what) detached, from the local scheduler, each once its tasks and
// transfers are done, and returns their data. The wait ends with ctx,
// with the graph's failure (it returns the failure: the tasks not
// started are canceled, the transfers ended), or at the stall timeout;
// a wait that gives up fails the graph, as it leaves the graph's tasks
// on this rank behind. After the waits, a failure heard of meanwhile is
// returned too.
func (d *Scheduler) release(ctx context.Context, what string, lhs []*scheduler.Handle) ([]any, error) {
	if len(lhs) == 0 {
		return nil, nil
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopFail := context.AfterFunc(d.graph, func() { cancel(context.Cause(d.graph)) })
	defer stopFail()
	stopWatch := d.watch(cancel)
	out := make([]any, len(lhs))
	var lerr error
	for i, lh := range lhs {
		if out[i], lerr = lh.Unregister(wctx); lerr != nil {
			break
		}
	}
	stopWatch()
	cause := context.Cause(wctx)
	if ferr := d.failure(); ferr != nil {
		// The graph failed (here, or heard of): that is the answer,
		// whether or not it ended the wait.
		return nil, fmt.Errorf("dist: %s on rank %d: %w", what, d.rank, ferr)
	}
	if lerr == nil {
		return out, nil
	}
	var why error
	switch {
	case ctx.Err() != nil:
		why = fmt.Errorf("stopped at %s: %w", what, context.Cause(ctx))
	case errors.Is(cause, ErrStalled):
		why = fmt.Errorf("%s: waiting for its tasks and transfers: %w; %s", what, cause, d.explain())
	default:
		why = fmt.Errorf("%s: %w", what, lerr)
	}
	// The copies' tasks are left behind: the graph cannot go on. The
	// other ranks hear why (and name this rank).
	err := fmt.Errorf("dist: rank %d: %w", d.rank, why)
	d.fail(err, why.Error())
	return nil, err
}
