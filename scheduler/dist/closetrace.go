package dist

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pzgo/pz/comm"
)

// CloseTrace is the trace Close writes (WithCloseTrace).
type CloseTrace struct {
	// Path is the merged trace's file (WriteTraceFiles: its Gantt chart
	// beside it, with the extension .svg).
	Path string
	// Root is the rank that writes it.
	Root int
	// Alone, when it is set and returns true at Close, makes every rank
	// write its own trace without trying to merge them (the job is
	// being aborted: the other ranks may never come to Close).
	Alone func() bool
	// Note gets what Close tells the user when a rank writes its own
	// trace instead of the merged one: the files and why. nil: standard
	// error.
	Note func(msg string)
}

// WithCloseTrace makes Close write the trace of every rank's tasks and
// transfers, merged (WriteTraceFiles), to t.Path on rank t.Root, when
// the graph completed on every rank: every rank's Close waits for its
// tasks as it does anyway (WaitAll, whose ranks agree on the outcome),
// then takes part in the merge. The local schedulers must record tasks
// (scheduler.WithStats). runtimeview.Scheduler sets it from PZ_TRACE on
// several ranks.
//
// A merge at Close must not hang for a rank that will not take part:
// when this rank knows that the graph failed (a task, a rank that left
// WaitAll or gave the graph up, a WaitAll that returned an error and
// nothing completed since), when t.Alone says so, or when the merge
// itself does not complete (a failure heard meanwhile, the stall
// timeout), the rank writes its own trace instead, to t.Path with
// ".rankR" before the extension (x.json: x.rank1.json and
// x.rank1.svg), so that no rank's trace replaces another's, and says so
// through t.Note. A rank that does not merge tells the others
// (ErrRankFailed), so that none waits for it in the merge.
func WithCloseTrace(t CloseTrace) Option {
	return func(d *Scheduler) { d.closeTrace = &t }
}

// RankTracePath is the file rank writes its own trace to when the merged
// trace at path cannot be written (WithCloseTrace): path with ".rankR"
// before its extension.
func RankTracePath(path string, rank int) string {
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + ".rank" + strconv.Itoa(rank) + ext
}

// mergeTraceAtClose is Close's merge of the ranks' traces (WithCloseTrace),
// after Close's WaitAll (waited: it returned nil, or there was nothing to
// wait for). It returns whether this rank took part in a merge that
// completed (on the root: and wrote the files), and otherwise why not;
// err is an error of the merge that is not the graph's failure (the
// root could not write the files).
func (d *Scheduler) mergeTraceAtClose(waited bool) (merged bool, why string, err error) {
	t := d.closeTrace
	if d.size > 1 {
		// Hear the failures and departures delivered so far.
		d.prog.sync()
	}
	d.mu.Lock()
	unwaited := d.unwaited
	d.mu.Unlock()
	switch {
	case t.Alone != nil && t.Alone():
		why = "the job is being aborted"
	case !waited || unwaited > 0:
		why = "the graph did not complete (WaitAll failed, or was not called since the failure)"
	case d.failure() != nil:
		why = "the graph failed: " + d.failure().Error()
	}
	if why != "" {
		if d.size > 1 {
			// A rank that merges waits for this one: it hears that this
			// one will not come (the graph's end, in mergeContext).
			d.announce([]byte{ctrlFailed}, "closed without its part of the merged trace: "+why)
		}
		return false, why, nil
	}
	ctx, stop := d.mergeContext()
	defer stop()
	if err := d.WriteTraceFiles(ctx, t.Path, t.Root); err != nil {
		if cause := context.Cause(ctx); cause != nil || errors.Is(err, comm.ErrBroken) {
			// A failure heard, a departure, the stall timeout or a rank
			// that returned (the communicator broke) ended the merge:
			// the failure is that rank's, reported where it happened.
			if cause == nil {
				cause = err
			}
			d.fail(cause, "")
			return false, "the merge did not complete: " + cause.Error(), nil
		}
		d.fail(err, "")
		return false, "the merge failed: " + err.Error(), err
	}
	return true, "", nil
}

// mergeContext is the context of the merge at Close: it ends when a
// failure is heard (the graph's end, fail), a rank departs, or after the
// stall timeout.
func (d *Scheduler) mergeContext() (context.Context, func()) {
	lctx, stopLeave := d.endOnLeave(context.Background(), agreementStep)
	ctx, cancel := context.WithCancelCause(lctx)
	stopAfter := context.AfterFunc(d.graph, func() { cancel(context.Cause(d.graph)) })
	bctx, stopBound := d.stallBound(ctx, "to merge the trace at Close (a rank failed, or closes much later)")
	return bctx, func() {
		stopBound()
		stopAfter()
		cancel(nil)
		stopLeave()
	}
}

// writeOwnTraceAtClose writes this rank's own trace (RankTracePath) and
// says why (WithCloseTrace), once its tasks have drained.
func (d *Scheduler) writeOwnTraceAtClose(why string) error {
	t := d.closeTrace
	own := RankTracePath(t.Path, d.rank)
	svg := strings.TrimSuffix(own, filepath.Ext(own)) + ".svg"
	note := t.Note
	if note == nil {
		note = func(s string) { fmt.Fprintln(os.Stderr, s) }
	}
	if err := d.local.WriteTraceFiles(own); err != nil {
		note(fmt.Sprintf("dist: rank %d: no merged trace %s (%s), and this rank's own trace could not be written: %v", d.rank, t.Path, why, err))
		return fmt.Errorf("dist: Close: writing rank %d's own trace: %w", d.rank, err)
	}
	note(fmt.Sprintf("dist: rank %d: wrote its own trace to %s and %s instead of the merged trace %s: %s", d.rank, own, svg, t.Path, why))
	return nil
}
