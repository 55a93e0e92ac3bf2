package scheduler

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pzgo/pz/internal/outfile"
	"github.com/pzgo/pz/scheduler/internal/chrometrace"
)

// traceEvent is one execution of a task (or one team member's share).
type traceEvent struct {
	id         uint64
	name       string
	start, end time.Duration // since the scheduler's start
	deps       []uint64
	rank, size int
	worker     int
	err        string // the task's error, with a panic's stack; "" on success
}

// WorkerStats are one worker's figures. Busy, Idle and Overhead are
// measured only with WithStats or WithTrace (PZ_STATS, PZ_TRACE: Timed);
// then they add up to the worker's lifetime, from New to the call of
// Stats, or to Close's end of waiting for the tasks. Otherwise all three
// are 0 (not a worker that did nothing but overhead).
type WorkerStats struct {
	Worker int
	Kind   WorkerKind
	// Timed reports whether Busy, Idle and Overhead were measured.
	Timed bool
	// Tasks is the number of tasks the worker completed. A parallel
	// task (WithTeam) counts once, on the member that completes it; the
	// other members count its run in Busy only, so the sum of Tasks over
	// the workers is the number of tasks.
	Tasks int64
	// Busy is the time spent in task implementations (for a CUDA
	// worker, the GPU's time running its tasks), counted when each
	// task ends.
	Busy time.Duration
	// Idle is the time spent looking for work and sleeping, the
	// current idle period included; the tasks a worker finds while it
	// polls for work (WithSpin) are Busy, not Idle.
	Idle time.Duration
	// Overhead is the rest of the worker's lifetime: scheduling, data
	// management, dependency release, and a task still running. It is
	// never negative, except for a CUDA worker whose tasks overlap on
	// the GPU (WithCUDAPipeline): their GPU times overlap too.
	Overhead time.Duration
	// Flops is the sum of Codelet.Flops of the completed tasks.
	Flops float64
	// Redirected counts, for a device's worker, the tasks it handed to
	// the CPU workers because their data could not fit in the device's
	// memory (they ran there, and count in the CPU workers' Tasks).
	Redirected int64
}

// Stats returns each worker's statistics so far (until Close). A worker
// publishes its task count every 64 tasks and when it goes idle, so the
// counts are exact once WaitAll has returned.
func (s *Scheduler) Stats() []WorkerStats {
	out := make([]WorkerStats, len(s.workers))
	idleSince := make([]int64, len(s.workers))
	for i, w := range s.workers {
		// The idle time, then the current idle period's start: endIdle
		// clears the start before it adds the period, so reading them
		// in this order counts a period once at most.
		out[i] = WorkerStats{
			Worker: w.info.ID, Kind: w.info.Kind, Tasks: w.nTasks.Load(),
			Busy: time.Duration(w.busyNs.Load()), Idle: time.Duration(w.idleNs.Load()),
			Flops: w.flops.Load(), Timed: s.cfg.stats, Redirected: w.redirected.Load(),
		}
		idleSince[i] = w.idleStart.Load()
	}
	// The end, read after the counters, is after every period they
	// count.
	end := s.now()
	if c := s.closedAt.Load(); c != 0 {
		end = c
	}
	for i := range out {
		st := &out[i]
		if !st.Timed {
			continue
		}
		if start := idleSince[i]; start != 0 {
			st.Idle += time.Duration(max(end-start, 0))
		}
		st.Overhead = time.Duration(end) - st.Busy - st.Idle
	}
	return out
}

// TraceID is t's number in the trace: TracedTask.ID, the Chrome trace's
// args.task. A layer above the scheduler (scheduler/dist) uses it to
// link its own records, such as a Detached task's transfer, to the
// traced tasks.
func (t *Task) TraceID() uint64 { return t.id }

// TraceDeps returns a copy of the trace numbers (TraceID) of the tasks t
// depends on, as TracedTask.Deps gives them; nil unless the scheduler
// records tasks (WithStats or WithTrace). Call it while t runs, as from
// its Detached implementation: a task is reused once it completes.
func (t *Task) TraceDeps() []uint64 {
	if len(t.preds) == 0 {
		return nil
	}
	return append([]uint64(nil), t.preds...)
}

func (s *Scheduler) traceEvents() []traceEvent {
	var all []traceEvent
	for _, w := range s.workers {
		for _, e := range w.events {
			e.worker = w.info.ID
			all = append(all, e)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].start < all[j].start })
	return all
}

// WriteTrace writes the Chrome trace JSON of the tasks run so far (with
// WithStats or WithTrace) to out. Call it after WaitAll or Close.
// Without WithStats or WithTrace it writes nothing and returns an error
// wrapping ErrNotRecording.
func (s *Scheduler) WriteTrace(out io.Writer) error {
	if err := s.recording("WriteTrace"); err != nil {
		return err
	}
	evs := s.traceEvents()
	extra := contextChromeEvents(s.contextSpans(s.traceEnd(evs)), s.Resizes(), len(s.workers))
	extra = append(extra, s.xferChromeEvents()...)
	names := make([]string, len(s.workers))
	for i := range names {
		names[i] = s.WorkerName(i)
	}
	return writeChromeTrace(out, evs, names, extra)
}

// WriteTraceFiles writes the Chrome trace JSON (WriteTrace) to path and
// the Gantt chart SVG (WriteGantt) beside it, with the extension replaced
// by .svg (path itself when it has none, with .svg added). A path ending
// in .svg is an error, and nothing is written: the chart would replace
// the trace. WithTrace makes Close call it.
func (s *Scheduler) WriteTraceFiles(path string) error {
	if err := s.recording("WriteTraceFiles"); err != nil {
		return err
	}
	if err := CheckTraceFile(path); err != nil {
		return fmt.Errorf("scheduler: trace %s: %w", path, err)
	}
	if err := outfile.Write(path, s.WriteTrace); err != nil {
		return fmt.Errorf("scheduler: trace: %w", err)
	}
	if err := outfile.Write(ganttPath(path), func(w io.Writer) error { return s.WriteGantt(w) }); err != nil {
		return fmt.Errorf("scheduler: trace: %w", err)
	}
	return nil
}

// recording returns an error wrapping ErrNotRecording, naming op and the
// options to enable, when the scheduler records no tasks.
func (s *Scheduler) recording(op string) error {
	if s.cfg.stats {
		return nil
	}
	return fmt.Errorf("%w: %s needs the tasks recorded; create the scheduler WithStats(true) or WithTrace(file) (or set PZ_STATS=1 or PZ_TRACE)", ErrNotRecording, op)
}

// ganttPath is the file of the Gantt chart written beside the trace
// file path.
func ganttPath(path string) string { return strings.TrimSuffix(path, filepath.Ext(path)) + ".svg" }

// CheckTraceFile returns nil if path can take a trace (WithTrace,
// PZ_TRACE, or a trace written by a layer above, such as scheduler/dist's
// merged one): not a name ending in .svg, which the Gantt chart written
// beside it would replace, in a directory that exists, not a directory
// itself; "" (no trace) passes. The error says what to use instead.
func CheckTraceFile(path string) error {
	if path != "" && strings.EqualFold(filepath.Ext(path), ".svg") {
		return fmt.Errorf("the trace is JSON and its Gantt chart is written beside it as %s, so the trace file must not end in %s (use %s)",
			filepath.Base(ganttPath(path)), filepath.Ext(path), filepath.Base(strings.TrimSuffix(path, filepath.Ext(path))+".json"))
	}
	if path != "" {
		// Checked now, not when Close writes the trace after the whole
		// run.
		dir := filepath.Dir(path)
		if st, err := os.Stat(dir); err != nil {
			return fmt.Errorf("the trace's directory %s: %w (create it first)", dir, err)
		} else if !st.IsDir() {
			return fmt.Errorf("the trace's directory %s is not a directory", dir)
		}
		if st, err := os.Stat(path); err == nil && st.IsDir() {
			return fmt.Errorf("%s is a directory; name the trace's file (%s)", path, filepath.Join(path, "trace.json"))
		}
	}
	return nil
}

// chromeEvent is an event of the trace format.
type chromeEvent = chrometrace.Event

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// inside returns the time nearest at strictly inside [start, end], a
// nanosecond from either end (start itself when the span is shorter):
// where a flow event binds to that slice.
func inside(start, end, at time.Duration) time.Duration {
	if end-start < 2 {
		return start
	}
	return min(max(at, start+1), end-1)
}

// writeChromeTrace writes the Trace Event Format (the "X" complete
// events, with flow events "s"/"f" for dependencies), which Perfetto
// and chrome://tracing open.
func writeChromeTrace(out io.Writer, evs []traceEvent, workers []string, extra []chromeEvent) error {
	type loc struct {
		worker     int
		start, end time.Duration
	}
	byID := make(map[uint64]loc, len(evs))
	for _, e := range evs {
		if e.rank == 0 {
			byID[e.id] = loc{e.worker, e.start, e.end}
		}
	}
	tw := chrometrace.NewWriter(out)
	emit := tw.Emit
	// Named, as the transfers' and contexts' processes are: Perfetto
	// shows an unnamed one as "Process 0".
	if err := emit(chrometrace.ProcessName(0, "workers")); err != nil {
		return err
	}
	for id, name := range workers {
		if err := emit(chrometrace.ThreadName(0, id, name)); err != nil {
			return err
		}
	}
	flow := uint64(0)
	for _, e := range evs {
		args := map[string]any{"task": e.id, "deps": e.deps}
		if e.size > 1 {
			args["rank"], args["team"] = e.rank, e.size
		}
		if e.err != "" {
			args["error"] = e.err
		}
		if err := emit(chromeEvent{Name: e.name, Cat: "task", Ph: "X", Ts: us(e.start), Dur: us(e.end - e.start),
			Pid: 0, Tid: e.worker, Args: args}); err != nil {
			return err
		}
		if e.rank != 0 {
			continue
		}
		for _, d := range e.deps {
			p, ok := byID[d]
			if !ok {
				continue
			}
			flow++
			// Each end a nanosecond inside its slice: Perfetto binds a
			// flow event to the slice open on its thread at its time,
			// which at the slice's very end may be the next one.
			if err := emit(chromeEvent{Name: "dep", Cat: "dep", Ph: "s", Ts: us(inside(p.start, p.end, p.end)), Pid: 0, Tid: p.worker, ID: flow}); err != nil {
				return err
			}
			if err := emit(chromeEvent{Name: "dep", Cat: "dep", Ph: "f", Bp: "e", Ts: us(inside(e.start, e.end, e.start)), Pid: 0, Tid: e.worker, ID: flow}); err != nil {
				return err
			}
		}
	}
	for _, c := range extra { // scheduling contexts (context_trace.go)
		if err := emit(c); err != nil {
			return err
		}
	}
	return tw.Close()
}
