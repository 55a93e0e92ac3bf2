package scheduler

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/pzgo/pz/scheduler/internal/gantt"
)

// A GanttOption changes what WriteGantt draws.
type GanttOption func(*ganttConfig)

type ganttConfig struct {
	critical bool
}

// GanttCriticalPath makes WriteGantt outline the tasks on the critical
// path (see CriticalPath) in black, join them with lines and dim the
// other tasks; a failed task on the path is outlined in black and
// ringed in red.
func GanttCriticalPath() GanttOption { return func(c *ganttConfig) { c.critical = true } }

// A TracedTask is a task as the trace recorded it.
type TracedTask struct {
	// ID is the task's number in the trace (the Chrome trace's
	// args.task).
	ID uint64
	// Name is its codelet's name.
	Name string
	// Start and End are since the scheduler started; a team task's span
	// from its first member's start to its last member's end.
	Start, End time.Duration
	// Workers are the workers that ran it: one, or a team's members in
	// rank order.
	Workers []int
	// Deps are the trace numbers (ID) of the tasks it depended on, the
	// Chrome trace's args.deps; among them, tasks that ran on no worker
	// (Detached ones) and so are not traced themselves. It is the
	// caller's own copy: changing it changes no other TracedTask and
	// no trace written later.
	Deps []uint64
	// Err is the task's error (with a panic's stack), "" when it
	// succeeded: the Chrome trace's args.error.
	Err string
}

// CriticalPath returns the tasks run so far (with WithStats or
// WithTrace) that form the longest chain of dependencies, weighted by
// the tasks' run times, first to last; nil if none ran. A chain's
// length counts the tasks' run times only, not the waits between them,
// so it is a lower bound of the run's span on any number of workers.
// Ties go to the lower task numbers. Call it after WaitAll or Close.
func (s *Scheduler) CriticalPath() []TracedTask {
	evs := s.traceEvents()
	byID := tracedByID(evs)
	var out []TracedTask
	for _, id := range gantt.CriticalPath(ganttBars(evs)) {
		out = append(out, *byID[id])
	}
	return out
}

// TracedTasks returns the tasks run so far (with WithStats or WithTrace),
// by start time, e.g. to merge the traces of several schedulers (package
// scheduler/dist merges its ranks'). Call it after WaitAll or Close.
func (s *Scheduler) TracedTasks() []TracedTask {
	evs := s.traceEvents()
	byID := tracedByID(evs)
	out := make([]TracedTask, 0, len(byID))
	for _, t := range byID {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b TracedTask) int { return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.ID, b.ID)) })
	return out
}

// WorkerName names worker id as charts and traces do: a CPU worker by
// its kind and number ("cpu0"), a device's worker by the device, as the
// copies' tracks name it, and its own number ("sim0 (worker 2)": worker
// 2 drives device sim0, whose copies are on the track "ram→sim0"), or
// by the name WithWorkerNames gave it. It panics if id is not a
// worker's, like a slice index.
func (s *Scheduler) WorkerName(id int) string {
	w := s.workers[id].info
	if n, ok := s.cfg.names[id]; ok && w.Kind == CPUWorker {
		return n
	}
	if w.Node == RAM || s.data == nil {
		return fmt.Sprintf("%v%d", w.Kind, w.ID)
	}
	return fmt.Sprintf("%s (worker %d)", s.data.nodeName(w.Node), w.ID)
}

// Recording reports whether the scheduler records the tasks it runs
// (WithStats or WithTrace).
func (s *Scheduler) Recording() bool { return s.cfg.stats }

// Epoch is when the scheduler started: the zero of its traces' times.
func (s *Scheduler) Epoch() time.Time { return s.epoch }

// tracedByID gathers trace events (one per team member) into tasks.
func tracedByID(evs []traceEvent) map[uint64]*TracedTask {
	byID := map[uint64]*TracedTask{}
	for _, e := range evs {
		t := byID[e.id]
		if t == nil {
			// Deps is cloned: the caller owns what it gets, and the
			// events keep the trace's own (off the hot path: only
			// TracedTasks and CriticalPath, after the run).
			t = &TracedTask{ID: e.id, Name: e.name, Start: e.start, End: e.end, Deps: slices.Clone(e.deps), Err: e.err}
			byID[e.id] = t
		}
		t.Start, t.End = min(t.Start, e.start), max(t.End, e.end)
		if e.rank >= len(t.Workers) {
			t.Workers = append(t.Workers, make([]int, e.rank+1-len(t.Workers))...)
		}
		t.Workers[e.rank] = e.worker
	}
	return byID
}

// WriteGantt writes an SVG Gantt chart of the tasks run so far (with
// WithStats or WithTrace) to out: one row per worker, labelled as
// WorkerName names it, one bar per task run coloured by codelet (the first
// eight codelets in the order of their first submitted task take eight
// colours far apart, so a program's codelets have the same colours in
// every run), a failed task ringed in red, idle time hatched, each worker's
// utilization (busy time over the chart's span) beside its row, a time
// axis, a legend of the codelets with their run counts and busy times,
// and with contexts a band under each row showing the worker's context,
// each context of the chart in a colour of its own (the global one grey).
// Options add to it (GanttCriticalPath). Call it after WaitAll or Close.
// Without WithStats or WithTrace it writes nothing and returns an error
// wrapping ErrNotRecording.
func (s *Scheduler) WriteGantt(out io.Writer, opts ...GanttOption) error {
	if err := s.recording("WriteGantt"); err != nil {
		return err
	}
	var cfg ganttConfig
	for _, o := range opts {
		o(&cfg)
	}
	evs := s.traceEvents()
	c := gantt.Chart{Bars: ganttBars(evs), Critical: cfg.critical, FirstIDs: s.codeletFirsts()}
	for _, w := range s.workers {
		c.Rows = append(c.Rows, gantt.Row{Label: s.WorkerName(w.info.ID)})
	}
	s.xferGantt(&c)
	spans := s.contextSpans(s.traceEnd(evs))
	var names []string
	for _, sp := range spans {
		names = append(names, sp.name)
	}
	colors := gantt.BandColors(names, GlobalName)
	for _, sp := range spans {
		c.Bands = append(c.Bands, gantt.Band{Row: sp.worker, Name: sp.name, Start: sp.start, End: sp.end, Color: colors[sp.name]})
	}
	if err := gantt.Write(out, c); err != nil {
		return fmt.Errorf("scheduler: writing the Gantt chart: %w", err)
	}
	return nil
}

// noteCodelet records id as the first task of cl's name unless one was
// recorded (statistics on; see Scheduler.firstIDs).
func (s *Scheduler) noteCodelet(cl *Codelet, id uint64) {
	if _, seen := s.seenCodelets.Load(cl); seen {
		return
	}
	s.firstMu.Lock()
	if s.firstIDs == nil {
		s.firstIDs = make(map[string]uint64)
	}
	if _, ok := s.firstIDs[cl.name()]; !ok {
		s.firstIDs[cl.name()] = id
	}
	s.firstMu.Unlock()
	s.seenCodelets.Store(cl, struct{}{})
}

// codeletFirsts returns a copy of firstIDs.
func (s *Scheduler) codeletFirsts() map[string]uint64 {
	s.firstMu.Lock()
	defer s.firstMu.Unlock()
	return maps.Clone(s.firstIDs)
}

// ganttBars converts trace events to the chart's bars.
func ganttBars(evs []traceEvent) []gantt.Bar {
	bars := make([]gantt.Bar, len(evs))
	for i, e := range evs {
		bars[i] = gantt.Bar{Row: e.worker, ID: e.id, Name: e.name, Start: e.start, End: e.end, Deps: e.deps, Err: firstLine(e.err)}
	}
	return bars
}

// firstLine is s up to its first newline (a panic's error carries its
// stack after it).
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
