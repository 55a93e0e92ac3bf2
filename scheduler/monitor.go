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
	// looking and then every idle tick while it sleeps; idle is the time
	// since it last had a task.
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
// m.IdleCycle every idleTick while they sleep (0: 1 ms). Without a
// monitor the hooks cost one atomic load per task.
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

// sleepMonitored sleeps until woken, calling the monitor's IdleCycle
// every tick; it returns early when a context change is posted for the
// worker.
func (w *worker) sleepMonitored(mb *monitorBox) {
	s := w.s
	if w.cx.timer == nil {
		w.cx.timer = time.NewTimer(mb.tick)
	} else {
		w.cx.timer.Reset(mb.tick)
	}
	defer w.cx.timer.Stop()
	for {
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
			w.cx.timer.Reset(cur.tick)
		}
	}
}
