package scheduler

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
)

// A task's code must not wait for tasks: WaitAll waits for the task
// itself, and a Synchronous task, a Wait, an Unregister or a Fetch that
// waits for one submitted after it (or for the task's own successors)
// waits for ever, while the worker it occupies runs nothing else. As
// StarPU answers -EDEADLK there, pz refuses such a wait with ErrInTask,
// naming the task, instead of hanging; as StarPU, it refuses every wait
// that would block there, also one that other workers could end (a Wait
// for an independent task), since which would end cannot be told at the
// call. Go has no goroutine-local state,
// so a wait that is about to block asks which goroutine calls it (a few
// hundred nanoseconds, only then) and compares it with the goroutines
// of the workers the scheduler runs; a driven worker's tasks run on the
// application's goroutines, which are not checked.

// goid returns the calling goroutine's id, read from the first line of
// its stack ("goroutine 17 [running]:"); 0 if it cannot be read.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b, ok := bytes.CutPrefix(b, []byte("goroutine "))
	if !ok {
		return 0
	}
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0
	}
	return id
}

// runningTask returns the worker of s whose goroutine calls it and the
// task it runs, or nils. The task is nil while the worker runs a task's
// callback (the task is not done until it returns) or a team task's
// code (runTeam's own Call): both are refused as a task's code is, as
// they hold the worker and their task.
func (s *Scheduler) runningTask() (*Task, *worker) {
	g := goid()
	if g == 0 {
		return nil, nil
	}
	for _, w := range s.workers {
		if w.g.Load() == g {
			// Its own goroutine: reading the call is no race.
			return w.call.Task, w
		}
	}
	return nil, nil
}

// CheckNotInTask returns an error wrapping ErrInTask when it is called
// by the code of a task (or a task's callback) that one of s's workers
// runs, and nil otherwise; what names the caller's call in the error
// ("dist WaitAll"). A layer built on s (dist) calls it before a wait of
// its own, which a task's code would otherwise make and deadlock in.
func (s *Scheduler) CheckNotInTask(what string) error {
	return s.checkNotInTask(what)
}

// checkNotInTask refuses a wait (what: "WaitAll", "Unregister of
// handle x", ...) made by the code of a task that one of s's workers
// runs.
func (s *Scheduler) checkNotInTask(what string) error {
	t, w := s.runningTask()
	if w == nil {
		return nil
	}
	by := "a task's callback or a team task's code"
	if t != nil {
		by = "the code of " + describeTask(t)
	}
	return fmt.Errorf("%w: %s called by %s on worker %d: a task cannot wait for tasks (it would wait for itself, or hold its worker while the tasks it waits for need one); submit the work as tasks of their own ordered by their data or by a continuation AfterTags of them (Example_recursive), and wait outside the tasks", ErrInTask, what, by, w.info.ID)
}

// describeTask names t as errors do: "task #3 of codelet "potrf"" (the
// number with statistics only).
func describeTask(t *Task) string {
	if t.id != 0 {
		return fmt.Sprintf("task #%d of codelet %q", t.id, t.Codelet.name())
	}
	return fmt.Sprintf("task of codelet %q", t.Codelet.name())
}
