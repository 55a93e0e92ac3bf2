package dist

import (
	"context"
	"fmt"
	"io"
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
}

// traceLog keeps a rank's transfer records.
type traceLog struct {
	mu    sync.Mutex
	xfers []xferRecord
}

func (l *traceLog) add(r xferRecord) {
	l.mu.Lock()
	l.xfers = append(l.xfers, r)
	l.mu.Unlock()
}

// rankTrace is what a rank contributes to the merged trace.
type rankTrace struct {
	Rank    int          `json:"rank"`
	Epoch   int64        `json:"epoch"` // the local scheduler's start, Unix ns
	Workers []string     `json:"workers"`
	Tasks   []taskRecord `json:"tasks"`
	Xfers   []xferRecord `json:"xfers"`
	Copies  []copyRecord `json:"copies,omitempty"` // the local scheduler's copies between memory nodes
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
	Start  int64  `json:"start"`
	End    int64  `json:"end"`
}

// WriteTraceFiles writes the trace of every rank's tasks and transfers so
// far, merged, on rank root: a Chrome trace JSON at path (Perfetto opens
// it) with one process per rank, one thread per worker and one for the
// rank's transfers, and a flow arrow from each send to its receive; and a
// Gantt chart SVG beside it (the extension replaced by .svg) with the
// ranks' workers stacked. A path ending in .svg, which the chart would
// overwrite, is refused on every rank (comm.ErrInvalidArg). The local schedulers must record tasks
// (scheduler.WithStats): if one does not, every rank returns an error
// naming the ranks that do not, and nothing is written. It is collective:
// every rank calls it, after WaitAll; times are aligned on the ranks'
// clocks (one machine, or hosts whose clocks agree).
func (d *Scheduler) WriteTraceFiles(ctx context.Context, path string, root int) error {
	if root < 0 || root >= d.size {
		return fmt.Errorf("dist: WriteTraceFiles: %w: root %d of %d ranks", ErrBadRank, root, d.size)
	}
	if strings.EqualFold(filepath.Ext(path), ".svg") {
		return fmt.Errorf("dist: WriteTraceFiles(%q): %w: the trace is JSON and its Gantt chart is written beside it with the extension .svg, so the trace file must not end in %s", path, comm.ErrInvalidArg, filepath.Ext(path))
	}
	recording, err := comm.AllGatherValues(ctx, d.c, d.local.Recording())
	if err != nil {
		return fmt.Errorf("dist: WriteTraceFiles: %w", err)
	}
	var silent []string
	for r, on := range recording {
		if !on {
			silent = append(silent, strconv.Itoa(r))
		}
	}
	if len(silent) > 0 {
		return fmt.Errorf("dist: WriteTraceFiles: %w: the local schedulers of ranks %s record no tasks; make them with scheduler.WithStats(true) (PZ_STATS=1)", comm.ErrInvalidArg, strings.Join(silent, ", "))
	}
	mine := rankTrace{Rank: d.rank, Epoch: d.local.Epoch().UnixNano()}
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
		mine.Tasks = append(mine.Tasks, taskRecord{Name: t.Name, Worker: t.Workers[0], Start: int64(t.Start), End: int64(t.End)})
	}
	d.trace.mu.Lock()
	mine.Xfers = append([]xferRecord(nil), d.trace.xfers...)
	d.trace.mu.Unlock()
	all, err := comm.GatherValues(ctx, d.c, mine, root)
	if err != nil {
		return fmt.Errorf("dist: gathering the trace: %w", err)
	}
	if d.rank != root {
		return nil
	}
	if err := outfile.Write(path, func(w io.Writer) error { return writeMergedTrace(w, all) }); err != nil {
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

// netThread is the thread id of a rank's transfers in the merged trace;
// copyThread+i that of its devices' link i (links).
const (
	netThread  = 1 << 20
	copyThread = netThread + 1
)

type chromeEvent = chrometrace.Event

func writeMergedTrace(out io.Writer, all []rankTrace) error {
	z := zero(all)
	at := func(r rankTrace, t int64) float64 { return float64(r.Epoch-z+t) / 1e3 } // µs
	var evs []chromeEvent
	type end struct {
		rank int
		ts   float64
	}
	sends := map[uint64]end{}
	for _, r := range all {
		evs = append(evs, chrometrace.ProcessName(r.Rank, fmt.Sprintf("rank %d", r.Rank)))
		for i, w := range r.Workers {
			evs = append(evs, chrometrace.ThreadName(r.Rank, i, w))
		}
		evs = append(evs, chrometrace.ThreadName(r.Rank, netThread, "transfers"))
		links := r.links()
		for i, l := range links {
			evs = append(evs, chrometrace.ThreadName(r.Rank, copyThread+i, l))
		}
		for _, c := range r.Copies {
			evs = append(evs, chromeEvent{Name: c.Kind, Cat: "copy", Ph: "X", Ts: at(r, c.Start), Dur: float64(c.End-c.Start) / 1e3,
				Pid: r.Rank, Tid: copyThread + slices.Index(links, c.Link), Args: map[string]any{"handle": c.Handle, "bytes": c.Bytes}})
		}
		for _, t := range r.Tasks {
			evs = append(evs, chromeEvent{Name: t.Name, Cat: "task", Ph: "X", Ts: at(r, t.Start), Dur: float64(t.End-t.Start) / 1e3, Pid: r.Rank, Tid: t.Worker})
		}
		for _, x := range r.Xfers {
			name := fmt.Sprintf("recv %s from %d", x.Handle, x.Peer)
			if x.Send {
				name = fmt.Sprintf("send %s to %d", x.Handle, x.Peer)
				sends[x.ID] = end{r.Rank, at(r, x.Start)}
			}
			evs = append(evs, chromeEvent{Name: name, Cat: "transfer", Ph: "X", Ts: at(r, x.Start), Dur: float64(x.End-x.Start) / 1e3,
				Pid: r.Rank, Tid: netThread, Args: map[string]any{"transfer": x.ID}})
		}
	}
	// A flow arrow from each send's start to its receive's end.
	for _, r := range all {
		for _, x := range r.Xfers {
			s, ok := sends[x.ID]
			if x.Send || !ok {
				continue
			}
			evs = append(evs,
				chromeEvent{Name: "transfer", Cat: "transfer", Ph: "s", Ts: s.ts, Pid: s.rank, Tid: netThread, ID: x.ID + 1},
				chromeEvent{Name: "transfer", Cat: "transfer", Ph: "f", Bp: "e", Ts: at(r, x.End), Pid: r.Rank, Tid: netThread, ID: x.ID + 1})
		}
	}
	tw := chrometrace.NewWriter(out)
	for _, e := range evs {
		if err := tw.Emit(e); err != nil {
			return err
		}
	}
	return tw.Close()
}

// writeMergedGantt draws every rank's workers, then its transfers, as rows,
// rank after rank.
func writeMergedGantt(out io.Writer, all []rankTrace) error {
	z := zero(all)
	var c gantt.Chart
	id := uint64(0)
	for _, r := range all {
		base := len(c.Rows)
		for _, w := range r.Workers {
			c.Rows = append(c.Rows, gantt.Row{Label: fmt.Sprintf("rank %d %s", r.Rank, w)})
		}
		net := len(c.Rows)
		c.Rows = append(c.Rows, gantt.Row{Label: fmt.Sprintf("rank %d transfers", r.Rank), Track: true})
		links := r.links()
		for _, l := range links {
			c.Rows = append(c.Rows, gantt.Row{Label: fmt.Sprintf("rank %d %s", r.Rank, l), Track: true})
		}
		for _, x := range r.Copies {
			id++
			c.Bars = append(c.Bars, gantt.Bar{Row: net + 1 + slices.Index(links, x.Link), ID: 1<<63 | id, Name: x.Kind,
				Start: time.Duration(r.Epoch - z + x.Start), End: time.Duration(r.Epoch - z + x.End)})
		}
		for _, t := range r.Tasks {
			id++
			c.Bars = append(c.Bars, gantt.Bar{Row: base + t.Worker, ID: id, Name: t.Name,
				Start: time.Duration(r.Epoch - z + t.Start), End: time.Duration(r.Epoch - z + t.End)})
		}
		for _, x := range r.Xfers {
			id++
			name := "recv"
			if x.Send {
				name = "send"
			}
			c.Bars = append(c.Bars, gantt.Bar{Row: net, ID: id, Name: name,
				Start: time.Duration(r.Epoch - z + x.Start), End: time.Duration(r.Epoch - z + x.End)})
		}
	}
	if err := gantt.Write(out, c); err != nil {
		return fmt.Errorf("dist: writing the Gantt chart: %w", err)
	}
	return nil
}
