package scheduler

import (
	"time"
)

// A Monitor observes the tasks and workers of every context, the way
// StarPU's performance counters feed its context hypervisor. The
// scheduler calls its methods on the goroutine named in each method's
// documentation, concurrently from several workers, holding no lock of
// its own: a Monitor may call the context API (MoveWorkersFor, ...),
// must be safe for concurrent use, and should be quick, since it runs on
// the path of every task. The exception is TaskPushed of a task the
// engine inserts (the combination of a Redux group, the gather of an
// Unpartition; Task.Codelet.Name starts "redux:" or is "gather"): it is
// called with the lock of the scheduler's handles held, so it must not
// submit tasks or call Handle methods that wait (Data, Fetch,
// Unregister, Partition) on that scheduler. c is the task's context (the global one for
// tasks submitted to none), or for idle events the innermost context of
// the worker.
type Monitor interface {
	// TaskPushed is called when a ready task is about to be queued in its
	// context, on the goroutine that made it ready (a submitter or a
	// worker). Like every hook, it may use t only during the call: a
	// task made by Submit is reused once it has completed.
	TaskPushed(c *Context, t *Task)
	// TaskPopped is called on the worker that took the task.
	TaskPopped(c *Context, t *Task, worker int)
	// IdleCycle is called on a worker that found no task, when it starts
	// looking and then every idle tick while it sleeps (for an
	// IdlePacer, when its NextIdleCycle says); idle is the time since it
	// last had a task.
	IdleCycle(c *Context, worker int, idle time.Duration)
	// IdleEnd is called on a worker that found a task after being idle
	// for idle.
	IdleEnd(c *Context, worker int, idle time.Duration)
	// TaskExecuted is called on the worker after it completed t (its
	// dependents are released), with the time from taking the task to
	// its completion.
	TaskExecuted(c *Context, t *Task, worker int, elapsed time.Duration)
}

type monitorBox struct {
	m    Monitor
	tick time.Duration
}

// SetMonitor installs m (nil removes the monitor); idle workers call
// m.IdleCycle every idleTick while they sleep (0: 1 ms), or, when m is
// an IdlePacer, when its NextIdleCycle says. Without a monitor the
// hooks cost one atomic load per task, and idle workers sleep until
// there is work.
func (s *Scheduler) SetMonitor(m Monitor, idleTick time.Duration) {
	if m == nil {
		s.cx.mon.Store(nil)
		return
	}
	s.Global()
	if idleTick <= 0 {
		idleTick = time.Millisecond
	}
	s.cx.mon.Store(&monitorBox{m: m, tick: idleTick})
	// Sleeping workers go back to sleep with the idle tick.
	s.wakeAll()
}

// RemoveMonitor removes m if it is the installed monitor, and reports
// whether it did; a monitor installed since (by SetMonitor) is left in
// place. It lets an observer detach itself without switching off the
// one that replaced it. m must be of a comparable type (a pointer).
func (s *Scheduler) RemoveMonitor(m Monitor) bool {
	for {
		mb := s.cx.mon.Load()
		if mb == nil || mb.m != m {
			return false
		}
		if s.cx.mon.CompareAndSwap(mb, nil) {
			return true
		}
	}
}

// idleCycle reports an idle cycle of the worker to the monitor.
func (w *worker) idleCycle(mb *monitorBox) {
	now := w.s.now() | 1
	if w.cx.idleStart == 0 {
		w.cx.idleStart = now
	}
	mb.m.IdleCycle(w.appliedContext(), w.info.ID, time.Duration(now-w.cx.idleStart))
}

// popped reports a popped task (and the end of an idle period).
func (w *worker) popped(mb *monitorBox, t *Task) {
	if w.cx.idleStart != 0 {
		idle := time.Duration(w.s.now() - w.cx.idleStart)
		w.cx.idleStart = 0
		mb.m.IdleEnd(w.appliedContext(), w.info.ID, idle)
	}
	mb.m.TaskPopped(w.s.contextOf(t), t, w.info.ID)
}

// An IdlePacer is a Monitor that says when its idle workers need their
// next IdleCycle, instead of the fixed idle tick of SetMonitor: a
// worker that sleeps for lack of work asks it after each IdleCycle of
// its sleep, and sleeps that long before the next, or, for a duration
// of 0 or less, until an event wakes it - a task for it, a context
// change posted for it, SetMonitor, WakeIdle, Close - and so costs no
// CPU while there is nothing for the monitor to decide. The
// hypervisor is one: it arms a timer only for its idle threshold, its
// next decision while it backs off, or its next sampling window, and
// wakes the workers with WakeIdle when an event ends its backoff.
type IdlePacer interface {
	// NextIdleCycle is called on a sleeping worker, on its goroutine,
	// when it starts sleeping and after each IdleCycle of its sleep,
	// with the worker's innermost context and idle time, as IdleCycle
	// is; it returns how long the worker may sleep before its next
	// IdleCycle (0 or less: until an event wakes it).
	NextIdleCycle(c *Context, worker int, idle time.Duration) time.Duration
}

// WakeIdle wakes the workers that sleep for lack of work: each looks
// for a task again and, finding none, reports an idle cycle to the
// monitor (IdleCycle, then NextIdleCycle for an IdlePacer) before it
// goes back to sleep. A monitor that let its workers sleep until an
// event (IdlePacer) calls it when something it decides on changed. It
// does not block, and may be called from any goroutine, the monitor's
// hooks included.
func (s *Scheduler) WakeIdle() { s.wakeAll() }

// nextIdle returns how long the sleeping worker waits for its next
// IdleCycle under mb (0 or less: until woken).
func (w *worker) nextIdle(mb *monitorBox) time.Duration {
	p, ok := mb.m.(IdlePacer)
	if !ok {
		return mb.tick
	}
	var idle time.Duration
	if w.cx.idleStart != 0 {
		idle = time.Duration((w.s.now() | 1) - w.cx.idleStart)
	}
	return p.NextIdleCycle(w.appliedContext(), w.info.ID, idle)
}

// sleepMonitored sleeps until woken, calling the monitor's IdleCycle
// every tick (or when its IdlePacer says); it returns early when a
// context change is posted for the worker.
func (w *worker) sleepMonitored(mb *monitorBox) {
	s := w.s
	d := w.nextIdle(mb)
	if w.cx.timer == nil {
		w.cx.timer = time.NewTimer(time.Hour)
		w.cx.timer.Stop()
	}
	defer w.cx.timer.Stop()
	for {
		if d <= 0 {
			// Nothing for the monitor to decide until an event.
			select {
			case <-w.wake:
			case <-s.stop:
			case <-w.quit:
			}
			return
		}
		w.cx.timer.Reset(d)
		select {
		case <-w.wake:
			return
		case <-s.stop:
			return
		case <-w.quit:
			return
		case <-w.cx.timer.C:
			cur := s.cx.mon.Load()
			if cur == nil {
				select {
				case <-w.wake:
				case <-s.stop:
				case <-w.quit:
				}
				return
			}
			w.idleCycle(cur)
			if w.cx.moveReq.Load() {
				return
			}
			d = w.nextIdle(cur)
		}
	}
}
