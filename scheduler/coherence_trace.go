package scheduler

import (
	"fmt"
	"sort"
	"time"

	"github.com/pzgo/pz/scheduler/internal/chrometrace"
	"github.com/pzgo/pz/scheduler/internal/gantt"
)

// Copies between memory nodes in the trace and the Gantt chart: one
// track per direction of each device's link, after the workers' rows.

// xferTrackPid is the Chrome trace process of the copies' tracks.
const xferTrackPid = 2

// xferLinks returns the links that carried copies, in a fixed order,
// and the recorded copies.
func (s *Scheduler) xferLinks() ([][2]MemoryNode, []xferEvent) {
	d := s.data
	if d == nil {
		return nil, nil
	}
	d.mu.Lock()
	evs := append([]xferEvent(nil), d.events...)
	d.mu.Unlock()
	seen := map[[2]MemoryNode]bool{}
	var links [][2]MemoryNode
	for _, e := range evs {
		l := [2]MemoryNode{e.from, e.to}
		if !seen[l] {
			seen[l] = true
			links = append(links, l)
		}
	}
	sort.Slice(links, func(i, j int) bool {
		a, b := links[i], links[j]
		return a[0]+a[1] < b[0]+b[1] || a[0]+a[1] == b[0]+b[1] && a[0] < b[0]
	})
	sort.Slice(evs, func(i, j int) bool { return evs[i].start < evs[j].start })
	return links, evs
}

func (s *Scheduler) linkName(l [2]MemoryNode) string {
	return fmt.Sprintf("%s→%s", s.data.nodeName(l[0]), s.data.nodeName(l[1]))
}

// copyName is what a copy is called in the chart and the trace.
func (e xferEvent) copyName() string {
	switch {
	case e.prefetch:
		return "prefetch"
	case e.to == RAM:
		return "copy out"
	}
	return "copy in"
}

// A TracedCopy is a copy between memory nodes that the data layer ran
// (recorded with WithStats or WithTrace).
type TracedCopy struct {
	// Link names the nodes it went between, "ram→sim0", as the Gantt
	// chart's track does.
	Link string
	// Kind is "copy in", "copy out" or "prefetch".
	Kind string
	// Handle names the data, Bytes its size.
	Handle string
	Bytes  int64
	// Start and End are since the scheduler started (Epoch).
	Start, End time.Duration
}

// TracedCopies returns the copies between memory nodes run so far (with
// WithStats or WithTrace), by start time, e.g. to merge the traces of
// several schedulers (package scheduler/dist merges its ranks'); nil
// without devices. Call it after WaitAll or Close.
func (s *Scheduler) TracedCopies() []TracedCopy {
	_, evs := s.xferLinks()
	var out []TracedCopy
	for _, e := range evs {
		out = append(out, TracedCopy{Link: s.linkName([2]MemoryNode{e.from, e.to}), Kind: e.copyName(), Handle: e.handle, Bytes: e.bytes, Start: e.start, End: e.end})
	}
	return out
}

// xferChromeEvents returns the copies as Chrome trace events.
func (s *Scheduler) xferChromeEvents() []chromeEvent {
	links, evs := s.xferLinks()
	if len(evs) == 0 {
		return nil
	}
	out := []chromeEvent{chrometrace.ProcessName(xferTrackPid, "transfers")}
	tid := map[[2]MemoryNode]int{}
	for i, l := range links {
		tid[l] = i
		out = append(out, chrometrace.ThreadName(xferTrackPid, i, s.linkName(l)))
	}
	for _, e := range evs {
		out = append(out, chromeEvent{Name: e.copyName(), Cat: "transfer", Ph: "X", Ts: us(e.start), Dur: us(e.end - e.start),
			Pid: xferTrackPid, Tid: tid[[2]MemoryNode{e.from, e.to}],
			Args: map[string]any{"handle": e.handle, "bytes": e.bytes, "from": s.data.nodeName(e.from), "to": s.data.nodeName(e.to)}})
	}
	return out
}

// xferGantt adds a row per link and a bar per copy to a chart whose
// rows are the workers.
func (s *Scheduler) xferGantt(c *gantt.Chart) {
	links, evs := s.xferLinks()
	row := map[[2]MemoryNode]int{}
	for _, l := range links {
		row[l] = len(c.Rows)
		c.Rows = append(c.Rows, gantt.Row{Label: s.linkName(l), Track: true})
	}
	for i, e := range evs {
		// Copies are not tasks: IDs apart from the tasks', no deps.
		c.Bars = append(c.Bars, gantt.Bar{Row: row[[2]MemoryNode{e.from, e.to}], ID: 1<<63 | uint64(i), Name: e.copyName(), Start: e.start, End: e.end})
	}
}
