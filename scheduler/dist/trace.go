package dist

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/internal/outfile"
	"github.com/pzgo/pz/scheduler/internal/chrometrace"
	"github.com/pzgo/pz/scheduler/internal/gantt"
)

// xferRecord is one transfer as this rank saw it: its number in the
// submission walk (the same on both ends), the handle, the peer and the
// times, in ns since the local scheduler's epoch.
type xferRecord struct {
	ID     uint64 `json:"id"`
	Handle string `json:"handle"`
	Peer   int    `json:"peer"`
	Send   bool   `json:"send"`
	Start  int64  `json:"start"`
	End    int64  `json:"end"`
	// Task is the transfer's task's number in the rank's trace, and Deps
	// (a send's) those of the tasks it waited for: the task that
	// produced the data sent, and the tasks that used the data received
	// (taskRecord.Deps), are found through them.
	Task uint64   `json:"task,omitempty"`
	Deps []uint64 `json:"deps,omitempty"`
}

// traceLog keeps a rank's transfer records, and the codelets in the
// order of their first submission (the same on every rank: the merged
// chart's colours follow it).
type traceLog struct {
	mu       sync.Mutex
	xfers    []xferRecord
	codelets []string
	seen     map[string]bool
	// skew is added to the time (time.Now, and the local scheduler's
	// epoch) to give this rank's clock for the merged trace (clock): 0,
	// but a test gives a rank a clock that is off, as another host's
	// may be (withTraceClockSkew).
	skew time.Duration
	// merges is the number of the last merge this rank started
	// (WriteTraceFiles): its clock rounds carry it (clockOffsets).
	merges int64
}

// mergeStart is what the ranks exchange as a merge starts: whether the
// rank's local scheduler records tasks, and its count of merges.
type mergeStart struct {
	Recording bool
	Merges    int64
}

// clock reads the rank's clock: time.Now, skewed (traceLog.skew).
func (l *traceLog) clock() time.Time { return time.Now().Add(l.skew) }

// withTraceClockSkew sets the rank's clock for the merged trace to be
// skew ahead of time.Now (traceLog.skew): the merge must place the
// rank's tasks where they ran all the same.
func withTraceClockSkew(skew time.Duration) Option {
	return func(d *Scheduler) { d.trace.skew = skew }
}

// submitted notes a submission of a task of codelet name.
func (l *traceLog) submitted(name string) {
	l.mu.Lock()
	if !l.seen[name] {
		if l.seen == nil {
			l.seen = map[string]bool{}
		}
		l.seen[name] = true
		l.codelets = append(l.codelets, name)
	}
	l.mu.Unlock()
}

func (l *traceLog) add(r xferRecord) {
	l.mu.Lock()
	l.xfers = append(l.xfers, r)
	l.mu.Unlock()
}

// rankTrace is what a rank contributes to the merged trace.
type rankTrace struct {
	Rank int `json:"rank"`
	// Epoch is the local scheduler's start, Unix ns on the rank's clock
	// (traceLog.clock; on the root's once the merge aligns it).
	Epoch   int64        `json:"epoch"`
	Workers []string     `json:"workers"`
	Tasks   []taskRecord `json:"tasks"`
	Xfers   []xferRecord `json:"xfers"`
	Copies  []copyRecord `json:"copies,omitempty"` // the local scheduler's copies between memory nodes
	// Codelets are the codelets in the order of their first submission
	// through Submit, on every rank, wherever the tasks ran.
	Codelets []string `json:"codelets,omitempty"`
}

// copyRecord is a copy between a rank's memory nodes (a device's link).
type copyRecord struct {
	Link   string `json:"link"`
	Kind   string `json:"kind"`
	Handle string `json:"handle"`
	Bytes  int64  `json:"bytes"`
	Start  int64  `json:"start"`
	End    int64  `json:"end"`
}

// links lists the links r's copies went over, sorted.
func (r rankTrace) links() []string {
	var out []string
	for _, c := range r.Copies {
		if !slices.Contains(out, c.Link) {
			out = append(out, c.Link)
		}
	}
	slices.Sort(out)
	return out
}

type taskRecord struct {
	Name   string `json:"name"`
	Worker int    `json:"worker"`
	Team   uint64 `json:"team"` // the task's number in the rank's trace: a team task's records share it
	Start  int64  `json:"start"`
	End    int64  `json:"end"`
	// Deps are the numbers of the tasks it depended on, transfers'
	// tasks among them.
	Deps []uint64 `json:"deps,omitempty"`
	// Err is the task's error, "" when it succeeded.
	Err string `json:"err,omitempty"`
}

// WriteTraceFiles writes the trace of every rank's tasks and transfers so
// far, merged, on rank root: a Chrome trace JSON at path (Perfetto opens
// it) with one process per rank, one thread per worker, the rank's
// transfers on threads "transfers", "transfers 2"... (as many as
// transfers overlap: the format forbids overlapping slices on one
// thread, and a receive is posted long before its data come), and flow
// arrows from the task that produced the data sent to its send, from
// each send to its receive, and from the receive to each task that used
// the data (the tasks' slices carry their numbers, args.task); and a
// Gantt chart SVG beside it
// (the extension replaced by .svg) with each rank's workers, then its
// receives and its sends on rows of their own, rank after rank. A path ending in .svg, which the chart would
// overwrite, is refused on every rank (comm.ErrInvalidArg). The local schedulers must record tasks
// (scheduler.WithStats): if one does not, every rank returns an error
// naming the ranks that do not, and nothing is written. It is collective:
// every rank calls it, after WaitAll (also one that failed: a failed
// task's slice carries its error, args.error, as every task's carries its
// dependencies, args.deps).
//
// The ranks' times are placed on root's clock: before the ranks' traces
// are gathered, root estimates each rank's clock against its own with a
// few ping-pong rounds (Cristian's method: of the round with the
// shortest round trip, the rank's reading less the middle of the
// round), and shifts the rank's times by it; the trace's metadata
// (clock_offsets) has each rank's offset and its uncertainty, half that
// round trip. Where the uncertainty leaves a receive ending before its
// send started, the receive's end is moved to just after the send's
// start, and the metadata's clamped_receives counts them.
func (d *Scheduler) WriteTraceFiles(ctx context.Context, path string, root int) error {
	if root < 0 || root >= d.size {
		return fmt.Errorf("dist: WriteTraceFiles: %w: root %d of %d ranks", ErrBadRank, root, d.size)
	}
	if strings.EqualFold(filepath.Ext(path), ".svg") {
		return fmt.Errorf("dist: WriteTraceFiles(%q): %w: the trace is JSON and its Gantt chart is written beside it with the extension .svg, so the trace file must not end in %s", path, comm.ErrInvalidArg, filepath.Ext(path))
	}
	// Each rank's count of its merges as well: the clock rounds are
	// numbered past every rank's (clockOffsets).
	d.trace.mu.Lock()
	merges := d.trace.merges
	d.trace.mu.Unlock()
	starts, err := comm.AllGatherValues(ctx, d.c, mergeStart{d.local.Recording(), merges})
	if err != nil {
		return fmt.Errorf("dist: WriteTraceFiles: %w", err)
	}
	var silent []string
	merge := int64(0)
	for r, st := range starts {
		if !st.Recording {
			silent = append(silent, strconv.Itoa(r))
		}
		merge = max(merge, st.Merges+1)
	}
	d.trace.mu.Lock()
	d.trace.merges = merge
	d.trace.mu.Unlock()
	if len(silent) > 0 {
		return fmt.Errorf("dist: WriteTraceFiles: %w: the local schedulers of ranks %s record no tasks; make them with scheduler.WithStats(true) (PZ_STATS=1)", comm.ErrInvalidArg, strings.Join(silent, ", "))
	}
	mine := rankTrace{Rank: d.rank, Epoch: d.local.Epoch().Add(d.trace.skew).UnixNano()}
	clocks, err := d.clockOffsets(ctx, root, merge)
	if err != nil {
		return fmt.Errorf("dist: WriteTraceFiles: %w", err)
	}
	for _, w := range d.local.Workers() {
		mine.Workers = append(mine.Workers, d.local.WorkerName(w.ID))
	}
	for _, c := range d.local.TracedCopies() {
		mine.Copies = append(mine.Copies, copyRecord{Link: c.Link, Kind: c.Kind, Handle: c.Handle, Bytes: c.Bytes, Start: int64(c.Start), End: int64(c.End)})
	}
	for _, t := range d.local.TracedTasks() {
		if len(t.Workers) == 0 {
			continue
		}
		// A team task on each member's worker (over the team's span),
		// as one task: Team numbers it among the rank's tasks.
		for _, w := range t.Workers {
			mine.Tasks = append(mine.Tasks, taskRecord{Name: t.Name, Worker: w, Team: t.ID, Start: int64(t.Start), End: int64(t.End), Deps: t.Deps, Err: t.Err})
		}
	}
	d.trace.mu.Lock()
	mine.Xfers = append([]xferRecord(nil), d.trace.xfers...)
	mine.Codelets = append([]string(nil), d.trace.codelets...)
	d.trace.mu.Unlock()
	all, err := comm.GatherValues(ctx, d.c, mine, root)
	if err != nil {
		return fmt.Errorf("dist: gathering the trace: %w", err)
	}
	if d.rank != root {
		return nil
	}
	cs := &clockSync{Root: root, Clocks: clocks}
	cs.Clamped = align(all, clocks)
	if err := outfile.Write(path, func(w io.Writer) error { return writeMergedTrace(w, all, cs) }); err != nil {
		return fmt.Errorf("dist: trace: %w", err)
	}
	if err := outfile.Write(strings.TrimSuffix(path, filepath.Ext(path))+".svg", func(w io.Writer) error { return writeMergedGantt(w, all) }); err != nil {
		return fmt.Errorf("dist: trace: %w", err)
	}
	return nil
}

// zero returns the earliest epoch of the ranks: the merged trace's zero.
func zero(all []rankTrace) int64 {
	z := all[0].Epoch
	for _, r := range all {
		z = min(z, r.Epoch)
	}
	return z
}

// netThread is the thread id of a rank's first transfer track in the
// merged trace; its other transfer tracks, then its devices' links'
// tracks, take the ids after it.
const netThread = 1 << 20

type chromeEvent = chrometrace.Event

// lanes assigns each of the intervals [start[i], end[i]) a lane, from 0,
// so that the intervals of a lane do not overlap (one may start where
// another ends), in as few lanes as the most intervals open at once; it
// returns the lanes and their count. The trace format requires complete
// events of one thread to nest, and Perfetto drops or misdraws those
// that overlap: a rank's transfers overlap (receives are posted early,
// sends run while they wait), so each lane is a thread of its own.
func lanes(n int, span func(i int) (start, end int64)) (lane []int, count int) {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		sa, ea := span(a)
		sb, eb := span(b)
		if sa != sb {
			return cmp.Compare(sa, sb)
		}
		return cmp.Compare(ea, eb)
	})
	lane = make([]int, n)
	var ends []int64 // each lane's last end
	for _, i := range order {
		start, end := span(i)
		l := slices.IndexFunc(ends, func(e int64) bool { return e <= start })
		if l < 0 {
			l = len(ends)
			ends = append(ends, 0)
		}
		ends[l] = end
		lane[i] = l
	}
	return lane, len(ends)
}

// laneName names lane l of a track called name: name itself, then
// "name 2", "name 3"...
func laneName(name string, l int) string {
	if l == 0 {
		return name
	}
	return fmt.Sprintf("%s %d", name, l+1)
}

// inside returns the time nearest at strictly inside [start, end], a
// nanosecond from either end (start itself when the span is shorter):
// where a flow event binds to that slice.
func inside(start, end, at int64) int64 {
	if end-start < 2 {
		return start
	}
	return min(max(at, start+1), end-1)
}

// clockRounds is the number of ping-pong rounds that estimate a rank's
// clock against the root's (clockOffsets).
const clockRounds = 8

// clockEstimate is a rank's clock against the root's (clockOffsets), in
// ns: Offset is how far it is ahead, within ± Uncertainty (half the
// round trip of the round it comes from).
type clockEstimate struct {
	Offset, Uncertainty int64
}

// clockSync is how the merge placed the ranks' clocks on the root's.
type clockSync struct {
	Root    int
	Clocks  []clockEstimate // by rank
	Clamped int             // receives whose end align moved (causality)
}

// clockOffsets estimates, on root, every rank's clock against root's by
// Cristian's method: clockRounds ping-pongs with each rank in turn, root
// noting its clock before (t0) and after (t1) each, the rank replying
// its clock's reading; of the round with the shortest round trip, the
// offset is the reading less (t0+t1)/2, within half the round trip. It
// is collective; other ranks return nil.
//
// Every message carries merge, the number the ranks agreed on for this
// merge (WriteTraceFiles), greater than any earlier merge's. A merge
// cut off in its rounds (a rank's context ended, the root gave up
// waiting for an answer) leaves messages on clockTag: a round the rank
// never received, an answer the root never did. Each side drops those
// of earlier merges. Without the number, the next merge's rank answered
// the stale round (the root took a reading from before its round
// started as this round's), the root then met the rank's answer to its
// own round one round late and failed with comm.ErrMismatch, and the
// rank waited for a round that never came, until its context ended:
// every later merge failed so.
func (d *Scheduler) clockOffsets(ctx context.Context, root int, merge int64) ([]clockEstimate, error) {
	buf := make([]int64, 3) // the merge; the round; the rank's clock
	if d.rank != root {
		for k := 0; k < clockRounds; {
			if _, err := comm.Recv(ctx, d.c, buf[:2], root, clockTag); err != nil {
				return nil, fmt.Errorf("clock round %d with rank %d: %w", k, root, err)
			}
			if buf[0] < merge {
				continue // a round of an earlier merge that did not complete
			}
			buf[2] = d.trace.clock().UnixNano()
			if err := comm.Send(ctx, d.c, buf, root, clockTag); err != nil {
				return nil, fmt.Errorf("clock round %d with rank %d: %w", k, root, err)
			}
			k++
		}
		return nil, nil
	}
	est := make([]clockEstimate, d.size)
	for r := range d.size {
		if r == root {
			continue
		}
		best := int64(-1)
		for k := range clockRounds {
			t0 := d.trace.clock()
			buf[0], buf[1] = merge, int64(k)
			if err := comm.Send(ctx, d.c, buf[:2], r, clockTag); err != nil {
				return nil, fmt.Errorf("clock round %d with rank %d: %w", k, r, err)
			}
			for {
				if _, err := comm.Recv(ctx, d.c, buf, r, clockTag); err != nil {
					return nil, fmt.Errorf("clock round %d with rank %d: %w", k, r, err)
				}
				if buf[0] == merge {
					break
				}
				// An answer to a round of an earlier merge that did not
				// complete.
			}
			rtt := int64(d.trace.clock().Sub(t0)) // monotonic
			if buf[1] != int64(k) {
				return nil, fmt.Errorf("clock round %d with rank %d: %w: its reply is round %d's", k, r, comm.ErrMismatch, buf[1])
			}
			if best < 0 || rtt < best {
				best = rtt
				est[r] = clockEstimate{Offset: buf[2] - (t0.UnixNano() + rtt/2), Uncertainty: (rtt + 1) / 2}
			}
		}
	}
	return est, nil
}

// align places every rank's times on the root's clock, shifting each
// rank's epoch by its clock's offset (clocks, by rank), then makes the
// transfers causal where the estimate's uncertainty left a receive
// ending before its send started: that receive's end moves to 2 ns after
// the send's start (the transfer arrow's ends, a nanosecond inside their
// slices, then in order). It returns the number of receives moved.
func align(all []rankTrace, clocks []clockEstimate) (clamped int) {
	for i := range all {
		if r := all[i].Rank; r < len(clocks) {
			all[i].Epoch -= clocks[r].Offset
		}
	}
	sendStart := map[uint64]int64{} // a transfer's send's start on the root's clock
	for _, r := range all {
		for _, x := range r.Xfers {
			if x.Send {
				sendStart[x.ID] = r.Epoch + x.Start
			}
		}
	}
	for i := range all {
		r := &all[i]
		for j := range r.Xfers {
			x := &r.Xfers[j]
			s, ok := sendStart[x.ID]
			if x.Send || !ok || r.Epoch+x.End >= s+2 {
				continue
			}
			x.End = s + 2 - r.Epoch
			clamped++
		}
	}
	return clamped
}

// metadata is the merged trace's "metadata": how the ranks' clocks were
// placed on the root's.
func (s *clockSync) metadata() map[string]any {
	var clocks []map[string]any
	for r, c := range s.Clocks {
		clocks = append(clocks, map[string]any{"rank": r, "offset_ns": c.Offset, "uncertainty_ns": c.Uncertainty})
	}
	return map[string]any{
		"clock_root": s.Root,
		// Each rank's clock ahead of the root's, ± the uncertainty,
		// subtracted from its times.
		"clock_offsets":    clocks,
		"clamped_receives": s.Clamped,
	}
}

// writeMergedTrace writes all's ranks' trace as one; cs, when not nil,
// goes in its metadata.
func writeMergedTrace(out io.Writer, all []rankTrace, cs *clockSync) error {
	z := zero(all)
	at := func(r rankTrace, t int64) float64 { return float64(r.Epoch-z+t) / 1e3 } // µs
	var evs []chromeEvent
	type end struct {
		rank, tid int
		ts        float64
	}
	sends := map[uint64]end{}
	xferTids := map[int][]int{} // rank -> the thread of each of its transfers
	for _, r := range all {
		evs = append(evs, chrometrace.ProcessName(r.Rank, fmt.Sprintf("rank %d", r.Rank)))
		for i, w := range r.Workers {
			evs = append(evs, chrometrace.ThreadName(r.Rank, i, w))
		}
		tid := netThread
		xl, nx := lanes(len(r.Xfers), func(i int) (int64, int64) { return r.Xfers[i].Start, r.Xfers[i].End })
		for l := range max(nx, 1) {
			evs = append(evs, chrometrace.ThreadName(r.Rank, tid+l, laneName("transfers", l)))
		}
		xferTid := tid
		tid += max(nx, 1)
		for _, link := range r.links() {
			var on []int // r.Copies' indexes on link
			for i, c := range r.Copies {
				if c.Link == link {
					on = append(on, i)
				}
			}
			cl, nc := lanes(len(on), func(i int) (int64, int64) { return r.Copies[on[i]].Start, r.Copies[on[i]].End })
			for l := range nc {
				evs = append(evs, chrometrace.ThreadName(r.Rank, tid+l, laneName(link, l)))
			}
			for k, i := range on {
				c := r.Copies[i]
				evs = append(evs, chromeEvent{Name: c.Kind, Cat: "copy", Ph: "X", Ts: at(r, c.Start), Dur: float64(c.End-c.Start) / 1e3,
					Pid: r.Rank, Tid: tid + cl[k], Args: map[string]any{"handle": c.Handle, "bytes": c.Bytes}})
			}
			tid += nc
		}
		for _, t := range r.Tasks {
			// As in a one-rank trace: the task's number, those of the
			// tasks it depended on (the transfers' among them), and a
			// failed task's error.
			args := map[string]any{"task": t.Team, "deps": t.Deps}
			if t.Err != "" {
				args["error"] = t.Err
			}
			evs = append(evs, chromeEvent{Name: t.Name, Cat: "task", Ph: "X", Ts: at(r, t.Start), Dur: float64(t.End-t.Start) / 1e3, Pid: r.Rank, Tid: t.Worker,
				Args: args})
		}
		for i, x := range r.Xfers {
			name := fmt.Sprintf("recv %s from %d", x.Handle, x.Peer)
			xferTids[r.Rank] = append(xferTids[r.Rank], xferTid+xl[i])
			if x.Send {
				name = fmt.Sprintf("send %s to %d", x.Handle, x.Peer)
				sends[x.ID] = end{r.Rank, xferTid + xl[i], at(r, inside(x.Start, x.End, x.Start))}
			}
			evs = append(evs, chromeEvent{Name: name, Cat: "transfer", Ph: "X", Ts: at(r, x.Start), Dur: float64(x.End-x.Start) / 1e3,
				Pid: r.Rank, Tid: xferTid + xl[i], Args: map[string]any{"transfer": x.ID}})
		}
	}
	// A flow arrow from each send to its receive, each on the thread of
	// its transfer's slice; one from the task that produced the data to
	// its send; and one from the receive to each task that used the data
	// there. Each end lies inside its slice (inside), so that Perfetto,
	// which binds a flow event to the slice open on its thread at its
	// time, binds it to that slice and not to one that starts or ends
	// at the same time.
	// The send-to-receive flows are numbered by their transfer's number
	// plus one, the others after the highest of those.
	flow := uint64(0)
	for _, r := range all {
		for _, x := range r.Xfers {
			flow = max(flow, x.ID+1)
		}
	}
	for _, r := range all {
		byTeam := map[uint64]taskRecord{}
		users := map[uint64][]taskRecord{} // a transfer's task -> the tasks that depended on it
		for _, t := range r.Tasks {
			if _, ok := byTeam[t.Team]; ok {
				continue // a team task: its first member's record
			}
			byTeam[t.Team] = t
			for _, dep := range t.Deps {
				users[dep] = append(users[dep], t)
			}
		}
		for i, x := range r.Xfers {
			tid := xferTids[r.Rank][i]
			if x.Send {
				// The producer: the task of this rank the send waited
				// for that ended last (none for data forwarded as
				// received).
				var prod *taskRecord
				for _, dep := range x.Deps {
					if t, ok := byTeam[dep]; ok && (prod == nil || t.End > prod.End) {
						prod = &t
					}
				}
				if prod != nil {
					flow++
					evs = append(evs,
						chromeEvent{Name: "produced", Cat: "transfer", Ph: "s", Ts: at(r, inside(prod.Start, prod.End, prod.End)), Pid: r.Rank, Tid: prod.Worker, ID: flow},
						chromeEvent{Name: "produced", Cat: "transfer", Ph: "f", Bp: "e", Ts: at(r, inside(x.Start, x.End, x.Start)), Pid: r.Rank, Tid: tid, ID: flow})
				}
				continue
			}
			if s, ok := sends[x.ID]; ok {
				evs = append(evs,
					chromeEvent{Name: "transfer", Cat: "transfer", Ph: "s", Ts: s.ts, Pid: s.rank, Tid: s.tid, ID: x.ID + 1},
					chromeEvent{Name: "transfer", Cat: "transfer", Ph: "f", Bp: "e", Ts: at(r, inside(x.Start, x.End, x.End)), Pid: r.Rank, Tid: tid, ID: x.ID + 1})
			}
			for _, t := range users[x.Task] {
				// From the receive's end, or from before the task's
				// start where align moved the end past it.
				flow++
				evs = append(evs,
					chromeEvent{Name: "received", Cat: "transfer", Ph: "s", Ts: at(r, inside(x.Start, x.End, min(x.End, t.Start))), Pid: r.Rank, Tid: tid, ID: flow},
					chromeEvent{Name: "received", Cat: "transfer", Ph: "f", Bp: "e", Ts: at(r, inside(t.Start, t.End, t.Start)), Pid: r.Rank, Tid: t.Worker, ID: flow})
			}
		}
	}
	tw := chrometrace.NewWriter(out)
	for _, e := range evs {
		if err := tw.Emit(e); err != nil {
			return err
		}
	}
	if cs == nil {
		return tw.Close()
	}
	return tw.CloseWithMetadata(cs.metadata())
}

// firstLine is s up to its first newline (a panic's error carries its
// stack): what a failed task's bar shows.
func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// writeMergedGantt draws every rank's workers, then its receives, its
// sends and its devices' links, as rows, rank after rank.
func writeMergedGantt(out io.Writer, all []rankTrace) error {
	if err := gantt.Write(out, mergedGantt(all)); err != nil {
		return fmt.Errorf("dist: writing the Gantt chart: %w", err)
	}
	return nil
}

func mergedGantt(all []rankTrace) gantt.Chart {
	z := zero(all)
	var c gantt.Chart
	// The codelets take the palette's colours (gantt.Colors) in the
	// order the program submitted their first tasks (on every rank
	// alike, wherever they ran), then those of tasks not submitted
	// through Submit in the order of rank 0's first tasks, then the next
	// rank's, and so on (FirstIDs), as in a one-rank chart of the same
	// program, whatever the ranks' shares of the work; the bars' IDs are above
	// those, the transfers' and copies' above the tasks', so that
	// neither takes a colour ahead of a codelet.
	c.FirstIDs = codeletOrder(all)
	n := uint64(len(all))
	id := uint64(0)
	for _, r := range all {
		base := len(c.Rows)
		for _, w := range r.Workers {
			c.Rows = append(c.Rows, gantt.Row{Label: fmt.Sprintf("rank %d %s", r.Rank, w)})
		}
		// Receives and sends on rows of their own: a receive is posted
		// early and pending long, and would hide the sends the rank
		// makes meanwhile. A rank without either has no such row.
		recvRow, sendRow := -1, -1
		if slices.ContainsFunc(r.Xfers, func(x xferRecord) bool { return !x.Send }) {
			recvRow = len(c.Rows)
			c.Rows = append(c.Rows, gantt.Row{Label: fmt.Sprintf("rank %d receives", r.Rank), Track: true, Noun: "receive"})
		}
		if slices.ContainsFunc(r.Xfers, func(x xferRecord) bool { return x.Send }) {
			sendRow = len(c.Rows)
			c.Rows = append(c.Rows, gantt.Row{Label: fmt.Sprintf("rank %d sends", r.Rank), Track: true, Noun: "send"})
		}
		// The tooltips say the rank, and a task's number in its rank's
		// trace (the trace's args.task), not the chart's IDs.
		onRank := fmt.Sprintf("on rank %d", r.Rank)
		linkRow := len(c.Rows)
		links := r.links()
		for _, l := range links {
			c.Rows = append(c.Rows, gantt.Row{Label: fmt.Sprintf("rank %d %s", r.Rank, l), Track: true})
		}
		for _, x := range r.Copies {
			id++
			c.Bars = append(c.Bars, gantt.Bar{Row: linkRow + slices.Index(links, x.Link), ID: 1<<63 | id, Name: x.Kind, Label: onRank,
				Start: time.Duration(r.Epoch - z + x.Start), End: time.Duration(r.Epoch - z + x.End)})
		}
		for _, t := range r.Tasks {
			// A team task's bars share the ID.
			c.Bars = append(c.Bars, gantt.Bar{Row: base + t.Worker, ID: 1<<61 + t.Team*n + uint64(r.Rank), Name: t.Name,
				Label: fmt.Sprintf("#%d %s", t.Team, onRank),
				Start: time.Duration(r.Epoch - z + t.Start), End: time.Duration(r.Epoch - z + t.End), Err: firstLine(t.Err)})
		}
		for _, x := range r.Xfers {
			id++
			name, row := "recv", recvRow
			if x.Send {
				name, row = "send", sendRow
			}
			c.Bars = append(c.Bars, gantt.Bar{Row: row, ID: 1<<62 | id, Name: name, Label: onRank,
				Start: time.Duration(r.Epoch - z + x.Start), End: time.Duration(r.Epoch - z + x.End)})
		}
	}
	return c
}

// codeletOrder numbers the codelets of all's tasks from 1: in the order
// of their first submission (rankTrace.Codelets, the same on every rank),
// then any other codelet of rank 0's tasks in the order of their first
// task on rank 0 (the lowest task number, the first submitted), then
// those rank 0 did not run in the order of rank 1's, and so on.
func codeletOrder(all []rankTrace) map[string]uint64 {
	order := map[string]uint64{}
	for _, r := range all {
		for _, name := range r.Codelets {
			if _, ok := order[name]; !ok {
				order[name] = uint64(len(order) + 1)
			}
		}
	}
	for _, r := range all {
		first := map[string]uint64{}
		for _, t := range r.Tasks {
			if f, ok := first[t.Name]; !ok || t.Team < f {
				first[t.Name] = t.Team
			}
		}
		names := slices.Collect(maps.Keys(first))
		slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(first[a], first[b]), strings.Compare(a, b)) })
		for _, name := range names {
			if _, ok := order[name]; !ok {
				order[name] = uint64(len(order) + 1)
			}
		}
	}
	return order
}
