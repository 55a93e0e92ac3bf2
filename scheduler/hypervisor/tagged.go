package hypervisor

import (
	"sync"

	"github.com/pzgo/pz/scheduler"
)

// taggedFlight follows the tagged tasks between their TaskPopped and
// their TaskExecuted, so that Close does not drop the requests of a
// policy's hooks (AppDriven.OnTag) whose task completed before Close:
// a worker completes a task - its waiters may return and call Close -
// before it calls TaskExecuted. Close lets the hooks of those tasks run
// (and their decisions), and waits for them; the hooks of tasks that
// complete after Close are not called.
type taggedFlight struct {
	mu     sync.Mutex
	closed bool
	// tasks are the tagged tasks popped and not executed yet; a worker
	// holds each until its TaskExecuted returned.
	tasks map[*scheduler.Task]struct{}
	// grace are the tasks that had completed when Close was
	// called; running counts the hooks under way (allowed to run).
	grace   map[*scheduler.Task]struct{}
	running int
	// idle is closed once, after Close, grace is empty and no hook
	// runs.
	idle chan struct{}
}

// popped records t (tagged) as popped.
func (f *taggedFlight) popped(t *scheduler.Task) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	if f.tasks == nil {
		f.tasks = map[*scheduler.Task]struct{}{}
	}
	f.tasks[t] = struct{}{}
}

// executed reports whether the hooks of t (tagged, executed) run:
// before Close, or when t had completed when Close was called. When it
// reports true, the caller calls finished once the hooks' decision ran.
func (f *taggedFlight) executed(t *scheduler.Task) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.tasks, t)
	if !f.closed {
		f.running++
		return true
	}
	if _, ok := f.grace[t]; ok {
		delete(f.grace, t)
		f.running++
		return true
	}
	return false
}

// finished ends a hook that executed allowed.
func (f *taggedFlight) finished() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running--
	f.signal()
}

// signal closes idle when Close waits and nothing is left; f.mu is held.
func (f *taggedFlight) signal() {
	if f.closed && f.idle != nil && len(f.grace) == 0 && f.running == 0 {
		close(f.idle)
		f.idle = nil
	}
}

// close stops recording tasks and returns a channel closed once the
// hooks of the tagged tasks that had completed (and those under way)
// ran, or nil when there are none.
func (f *taggedFlight) close() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for t := range f.tasks {
		select {
		case <-t.Done(): // t is held by its worker until its TaskExecuted
			if f.grace == nil {
				f.grace = map[*scheduler.Task]struct{}{}
			}
			f.grace[t] = struct{}{}
		default:
		}
	}
	f.tasks = nil
	if len(f.grace) == 0 && f.running == 0 {
		return nil
	}
	f.idle = make(chan struct{})
	return f.idle
}
