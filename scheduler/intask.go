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
// so a wait that is about to block asks which goroutine calls it, only
// then, and compares it with the goroutines of the workers the
// scheduler runs; a driven worker's tasks run on the application's
// goroutines, which are not checked. Reading the goroutine's id from
// its stack trace costs 3-30 µs (it formats every frame: more the
// deeper the caller), so the outermost frame of the caller's stack,
// which runtime.Callers finds ten times faster, is compared first with
// the one each worker's goroutine has (the scheduler's runWorker): a
// caller whose stack does not start there is no worker's, and only one
// whose stack does pays for its id.

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

// stackRoot returns the entry of the outermost function of the calling
// goroutine's stack below runtime.goexit (the function the go statement
// started, or its wrapper), or 0 if it cannot be told. The entry, not
// the frame's program counter: that is wherever the function stands
// in its body, and with the functions it calls inlined the worker's
// differs from call to call.
func stackRoot() uintptr {
	var pcs [64]uintptr
	var last [2]uintptr
	for skip := 0; ; {
		n := runtime.Callers(skip, pcs[:])
		switch {
		case n >= 2:
			last = [2]uintptr{pcs[n-2], pcs[n-1]}
		case n == 1:
			last = [2]uintptr{last[1], pcs[0]}
		}
		if n < len(pcs) {
			// last[1] is runtime.goexit's; the frame above it is the
			// goroutine's own.
			if f := runtime.FuncForPC(last[0] - 1); f != nil {
				return f.Entry()
			}
			return 0
		}
		skip += n
	}
}

// runningTask returns the worker of s whose goroutine calls it and the
// task it runs, or nils. The task is nil while the worker runs a task's
// callback (the task is not done until it returns) or a team task's
// code (runTeam's own Call): both are refused as a task's code is, as
// they hold the worker and their task.
func (s *Scheduler) runningTask() (*Task, *worker) {
	root := stackRoot()
	maybe := root == 0 // unknown: ask for the id
	for _, w := range s.workers {
		if maybe {
			break
		}
		// A worker's goroutine whose root is unknown is asked for too.
		r := w.root.Load()
		maybe = w.g.Load() != 0 && (r == 0 || r == root)
	}
	if !maybe {
		return nil, nil
	}
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
