package scheduler

import (
	"fmt"
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
