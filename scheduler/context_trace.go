package scheduler

import (
	"bufio"
	"fmt"
	"slices"
	"time"
)

// ctxSpan is a period during which a worker was in a context (its
// innermost one).
type ctxSpan struct {
	worker     int
	name       string
	id         int
	start, end time.Duration
}

// contextSpans returns each worker's context periods from the applied
// resizes, up to end; nil if no worker ever changed context.
func (s *Scheduler) contextSpans(end time.Duration) []ctxSpan {
	rs := s.Resizes()
	if len(rs) == 0 {
		return nil
	}
	cur := make([]ctxSpan, len(s.workers))
	for i := range cur {
		cur[i] = ctxSpan{worker: i, name: GlobalName}
	}
	var out []ctxSpan
	for _, r := range rs {
		c := &cur[r.Worker]
		c.end = r.At
		if c.end > c.start {
			out = append(out, *c)
		}
		*c = ctxSpan{worker: r.Worker, name: r.To, id: r.ToID, start: r.At}
	}
	for _, c := range cur {
		c.end = max(end, c.start)
		out = append(out, c)
	}
	return out
}

// traceEnd is the end of the traced period: the last task's end or
// resize, whichever is later.
func (s *Scheduler) traceEnd(evs []traceEvent) time.Duration {
	var end time.Duration
	for _, e := range evs {
		end = max(end, e.end)
	}
	for _, r := range s.Resizes() {
		end = max(end, r.At)
	}
	return end
}

// contextChromeEvents returns the context part of the Chrome trace: a
// "contexts" process with one track per worker showing which context it
// was in, and an instant event per resize.
func contextChromeEvents(spans []ctxSpan, rs []Resize, nworkers int) []chromeEvent {
	if len(spans) == 0 {
		return nil
	}
	const pid = 1
	evs := []chromeEvent{{Name: "process_name", Ph: "M", Pid: pid, Args: map[string]any{"name": "contexts"}}}
	for w := 0; w < nworkers; w++ {
		evs = append(evs, chromeEvent{Name: "thread_name", Ph: "M", Pid: pid, Tid: w,
			Args: map[string]any{"name": fmt.Sprintf("cpu%d context", w)}})
	}
	for _, c := range spans {
		evs = append(evs, chromeEvent{Name: c.name, Cat: "context", Ph: "X", Ts: us(c.start), Dur: us(c.end - c.start),
			Pid: pid, Tid: c.worker, Args: map[string]any{"context": c.id}})
	}
	for _, r := range rs {
		evs = append(evs, chromeEvent{Name: "resize " + r.From + " -> " + r.To, Cat: "resize", Ph: "i", Ts: us(r.At),
			Pid: pid, Tid: r.Worker, Args: map[string]any{"from": r.From, "to": r.To, "reason": r.Reason}})
	}
	return evs
}

// contextNames returns the contexts' names in spans, sorted.
func contextNames(spans []ctxSpan) []string {
	var names []string
	for _, c := range spans {
		if !slices.Contains(names, c.name) {
			names = append(names, c.name)
		}
	}
	slices.Sort(names)
	return names
}

// drawContexts draws, under each worker's row of the Gantt chart, a band
// colored by the worker's context over time, a tick at each change, and
// a legend of the contexts at legendY.
func drawContexts(bw *bufio.Writer, spans []ctxSpan, t0 time.Duration, span, left, width, top, rowH, legendY float64) {
	for _, c := range spans {
		x0 := left + width*float64(max(c.start-t0, 0))/span
		x1 := left + width*float64(max(c.end-t0, 0))/span
		x0, x1 = min(x0, left+width), min(x1, left+width)
		if x1 <= x0 {
			continue
		}
		y := top + rowH*float64(c.worker) + rowH - 6
		fmt.Fprintf(bw, `<rect x="%.2f" y="%.1f" width="%.2f" height="4" fill="%s"><title>context %s</title></rect>`+"\n",
			x0, y, x1-x0, contextColor(c.name), escapeXML(c.name))
		if c.start > t0 {
			fmt.Fprintf(bw, `<line x1="%.2f" x2="%.2f" y1="%.1f" y2="%.1f" stroke="black" stroke-width="1"/>`+"\n",
				x0, x0, top+rowH*float64(c.worker), top+rowH*float64(c.worker)+rowH-2)
		}
	}
	for i, n := range contextNames(spans) {
		yy := legendY + 16*float64(i)
		fmt.Fprintf(bw, `<rect x="%.0f" y="%.0f" width="12" height="4" fill="%s"/><text x="%.0f" y="%.0f">context %s</text>`+"\n",
			left+400, yy-6, contextColor(n), left+416, yy, escapeXML(n))
	}
}

// contextColor picks a stable color per context name, from a palette
// distinct from the codelets'.
func contextColor(name string) string {
	palette := []string{"#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"}
	if name == GlobalName {
		return "#999999"
	}
	h := uint32(2166136261)
	for i := 0; i < len(name); i++ {
		h = (h ^ uint32(name[i])) * 16777619
	}
	return palette[h%uint32(len(palette))]
}
