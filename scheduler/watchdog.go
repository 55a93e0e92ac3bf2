package scheduler

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// A Stall is what the watchdog (WithWatchdog, PZ_WATCHDOG) saw when no
// task of the scheduler had finished for its timeout while tasks were in
// flight, as StarPU's STARPU_WATCHDOG_TIMEOUT reports: a graph that
// waits for something that never comes, or a task that runs far longer
// than it should, instead of a program that hangs in silence.
type Stall struct {
	// For is how long no task has finished.
	For time.Duration
	// InFlight is the count of tasks submitted and not completed (a
	// worker publishes its completions in batches: it can count a few
	// that have just completed).
	InFlight int64
	// Running are the tasks that workers run now (on a GPU worker, the
	// oldest task in flight on its streams), by worker.
	Running []RunningTask
	// Causes is what the scheduler knows keeps tasks from running: waits
	// for a tag no task carries or for a task never submitted
	// (ErrNotSubmitted), driven workers that nothing drives (ErrDriver),
	// contexts holding tasks and no workers (ErrNoWorkers), team tasks
	// short of workers (ErrTeamSize). Empty when the scheduler knows of
	// none: the tasks then wait for running ones, or for something
	// outside the scheduler (a Handle's Data or Fetch held by the
	// program, a distributed graph's messages, a task's own code).
	Causes []error
}

// A RunningTask is a task a worker was running when the watchdog looked.
type RunningTask struct {
	Worker  int        // the worker's id
	Kind    WorkerKind // the worker's kind
	Codelet string     // the task's codelet's name
	For     time.Duration
}

// String is the report on one line: "no task finished for 10s; 3
// tasks in flight; running: worker 0 (cpu) "potrf" for 10.2s; ...".
func (st Stall) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "no task finished for %v; %s in flight", st.For.Round(time.Millisecond), tasks(st.InFlight))
	if len(st.Running) == 0 {
		b.WriteString("; none running")
	} else {
		b.WriteString("; running: ")
		b.WriteString(runningList(st.Running))
	}
	for _, c := range st.Causes {
		b.WriteString("; ")
		b.WriteString(c.Error())
	}
	return b.String()
}

// WithWatchdog reports a stall (see Stall) each time no task has
// finished for timeout while tasks are in flight, then again after twice
// as long, four times, and so on while the stall lasts; a finished task
// starts the count again. report receives each Stall on the watchdog's
// goroutine, and must return (Close waits for it); nil logs it: a Warn on the logger of WithLogger, or a line
// on standard error without one. The watchdog only reports: WaitAll and
// Close go on waiting (give WaitAll a context with a deadline to stop
// waiting). timeout 0 turns it off. Default: the environment variable
// PZ_WATCHDOG, a duration ("30s", "2m"; "0" or unset: off).
func WithWatchdog(timeout time.Duration, report func(Stall)) Option {
	return func(c *config) { c.watchdog, c.watchdogSet, c.watchdogReport = timeout, true, report }
}

// watchdog is WithWatchdog's state. Workers count their completions in
// their own worker.wdDone (no line shared across cores) and name the
// task they run in wdCur and wdSince; completions off a worker go to
// done.
type watchdog struct {
	s       *Scheduler
	timeout time.Duration
	report  func(Stall)
	done    atomic.Uint64
	stop    chan struct{}
	exited  chan struct{}

	// The state of tick, on the watchdog's goroutine.
	last       uint64        // completions seen at the last change
	lastChange time.Duration // when they changed (scheduler time)
	next       time.Duration // stall length of the next report
}

func newWatchdog(s *Scheduler, timeout time.Duration, report func(Stall)) *watchdog {
	wd := &watchdog{s: s, timeout: timeout, report: report, next: timeout,
		stop: make(chan struct{}), exited: make(chan struct{})}
	if wd.report == nil {
		wd.report = s.logStall
	}
	return wd
}

// logStall is the default report.
func (s *Scheduler) logStall(st Stall) {
	if l := s.cfg.logger; l != nil {
		causes := make([]string, len(st.Causes))
		for i, c := range st.Causes {
			causes[i] = c.Error()
		}
		l.Warn("scheduler watchdog: no task finished", zap.Int("scheduler", s.id), zap.Duration("for", st.For),
			zap.Int64("in_flight", st.InFlight), zap.String("running", runningList(st.Running)), zap.Strings("causes", causes))
		return
	}
	fmt.Fprintf(os.Stderr, "pz scheduler %d: watchdog: %v\n", s.id, st)
}

func runningList(rs []RunningTask) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return strings.Join(parts, ", ")
}

// String says "worker 0 (cpu) "potrf" for 10.2s".
func (r RunningTask) String() string {
	return fmt.Sprintf("worker %d (%v) %q for %v", r.Worker, r.Kind, r.Codelet, r.For.Round(time.Millisecond))
}

// loop looks at the scheduler every quarter of the timeout until Close
// stops the workers.
func (wd *watchdog) loop() {
	defer close(wd.exited)
	period := max(wd.timeout/4, time.Millisecond)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-wd.stop:
			return
		case <-t.C:
		}
		if st, ok := wd.tick(time.Duration(wd.s.now())); ok {
			wd.report(st)
		}
	}
}

// Running returns the tasks that the workers run now and for how long
// (on a GPU worker, its oldest task in flight), when the watchdog is on
// (WithWatchdog, PZ_WATCHDOG): only then do workers record what they
// run, and ok is false without it. A layer above the scheduler uses it
// to say what a rank that stopped moving is busy with.
func (s *Scheduler) Running() (tasks []RunningTask, ok bool) {
	if s.wd == nil {
		return nil, false
	}
	return s.wd.running(time.Duration(s.now())), true
}

// running lists what the workers run at time now.
func (wd *watchdog) running(now time.Duration) []RunningTask {
	var out []RunningTask
	for _, w := range wd.s.workers {
		// The two loads can straddle the worker's next task: the
		// report then gives one task's codelet with the other's start.
		if cl := w.wdCl.Load(); cl != nil {
			out = append(out, RunningTask{Worker: w.info.ID, Kind: w.info.Kind, Codelet: cl.name(),
				For: max(now-time.Duration(w.wdSince.Load()), 0)})
		}
	}
	return out
}

// completions counts the tasks completed so far.
func (wd *watchdog) completions() uint64 {
	n := wd.done.Load()
	for _, w := range wd.s.workers {
		n += w.wdDone.Load()
	}
	return n
}

// tick looks at the scheduler at time now and returns the stall to
// report, if one is due: tasks in flight, none finished for wd.next.
func (wd *watchdog) tick(now time.Duration) (Stall, bool) {
	n := wd.completions()
	inflight := wd.s.inflight.n.Load()
	if n != wd.last || inflight <= 0 {
		wd.last, wd.lastChange, wd.next = n, now, wd.timeout
		return Stall{}, false
	}
	idle := now - wd.lastChange
	if idle < wd.next {
		return Stall{}, false
	}
	wd.next *= 2
	return Stall{For: idle, InFlight: inflight, Running: wd.running(now), Causes: wd.s.stuckCauses(nil)}, true
}

// wdStart records, with the watchdog on, that w runs a task of cl
// since the scheduler time since (nil: none).
func (w *worker) wdStart(cl *Codelet, since int64) {
	w.wdSince.Store(since)
	w.wdCl.Store(cl)
}

// close stops the watchdog and waits for its goroutine.
func (wd *watchdog) close() {
	close(wd.stop)
	<-wd.exited
}
