package scheduler

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/pzgo/pz/internal/ctxerr"
)

// Sentinel errors. Each is wrapped with details naming the codelet, handle
// or option involved; test for them with errors.Is.
var (
	// ErrClosed is returned by Submit, Register, Partition, NewContext,
	// AddWorkers, RemoveWorkers, MoveWorkers and Delete calls made after
	// Close (from the moment Close is called).
	ErrClosed = errors.New("scheduler: closed")
	// ErrNoImplementation is returned by Submit when the task's codelet has
	// no implementation for any worker kind this scheduler has (a codelet
	// without a CPU function), and for a nil codelet or a nil Task.
	ErrNoImplementation = errors.New("scheduler: no implementation for any available worker")
	// ErrUnregistered is returned when a task accesses a handle that was
	// unregistered, or a tile of a matrix that was unpartitioned.
	ErrUnregistered = errors.New("scheduler: handle used after unregister")
	// ErrPartitioned is returned when a task accesses, or Unregister or
	// SetReduction is called on, a handle that is currently partitioned
	// into tiles: the tiles own the data until Unpartition.
	ErrPartitioned = errors.New("scheduler: handle is partitioned")
	// ErrInvalidMode is returned by Submit for an access mode that is not
	// one of R, W, RW, Scratch, Redux, Commute (RW|Commute or W|Commute),
	// or for incompatible modes on the same handle in one task.
	ErrInvalidMode = errors.New("scheduler: invalid access mode")
	// ErrForeignHandle is returned when a task uses a handle registered
	// with another Scheduler.
	ErrForeignHandle = errors.New("scheduler: handle belongs to another scheduler")
	// ErrUnknownPolicy is returned by New for a policy name that is not
	// registered; the message lists the valid names.
	ErrUnknownPolicy = errors.New("scheduler: unknown policy")
	// ErrCanceled is the error of a task that was not run because a task
	// it depends on (explicitly, through a tag or through data) failed,
	// or because its CancelOn context ended before it started.
	ErrCanceled = errors.New("scheduler: task canceled")
	// ErrBadTeam is returned by Submit when a parallel task asks for more
	// workers than its context has CPU workers at submission (the
	// scheduler's, for the global context), or for a team it cannot run
	// (a negative size, a detached or CUDA-only codelet).
	ErrBadTeam = errors.New("scheduler: invalid team size")
	// ErrOverlap is returned by Register when the memory overlaps a handle
	// that is still registered: two handles aliasing memory would let a
	// writer through one path race with readers through the other.
	ErrOverlap = errors.New("scheduler: memory already registered")
	// ErrBadData is returned by Register for data of the wrong shape or
	// type (not a slice, a slice too short for rows, cols and ld, ...),
	// and by Submit and the Handle methods for a nil handle.
	ErrBadData = errors.New("scheduler: invalid data")
	// ErrAlreadySubmitted is returned by SubmitTask for a Task value that
	// was already submitted: a Task runs once.
	ErrAlreadySubmitted = errors.New("scheduler: task already submitted")
	// ErrBadOption is returned by New for an invalid option or
	// environment variable value.
	ErrBadOption = errors.New("scheduler: invalid option")
	// ErrNotSubmitted is joined to WaitAll's error when its context ends
	// while tasks wait for a tag that no submitted task carries, or for
	// a task named in After that was never submitted: each such wait is
	// named. WaitTag's error wraps it too when its context ends while no
	// submitted task carries the tag it waits for.
	ErrNotSubmitted = errors.New("scheduler: waiting for a task never submitted")
	// ErrBadModel is returned by Submit for a codelet whose performance
	// model has an empty Name, and wrapped in Close's error for a model
	// file that cannot be read or parsed or holds invalid values (the
	// error names the file and the value): such a file is neither used
	// nor overwritten, and its model starts uncalibrated.
	ErrBadModel = errors.New("scheduler: invalid performance model")
	// ErrNotRecording is returned by WriteTrace, WriteGantt and
	// WriteTraceFiles when the scheduler records no tasks: neither
	// WithStats nor WithTrace (PZ_STATS, PZ_TRACE) was given, so there
	// is nothing to draw.
	ErrNotRecording = errors.New("scheduler: tasks not recorded")
	// ErrInTask is returned by a wait made by the code of a running task,
	// a team task's or a task's callback (WaitAll, Wait, WaitTag, a
	// Synchronous Submit, Unregister, Fetch, and Close, which waits for
	// every task) when it would block: a task
	// cannot wait for tasks, as in StarPU (-EDEADLK); Data from there
	// does not wait. Only tasks run by the workers the scheduler starts are
	// checked, not those a Driver runs, and a Wait only for a task
	// already submitted (or named in After): before that, the task's
	// scheduler is not known.
	ErrInTask = errors.New("scheduler: waiting inside a task")
	// ErrTaskPending is wrapped, with the context's error, in the error
	// of a Synchronous Submit (a Driver's too) and of Task.Wait whose
	// context ended before the task completed. The task was submitted
	// and is not withdrawn: it runs (once its dependencies allow), its
	// callbacks run when it completes, and WaitAll and Close wait for
	// it. A Submit whose error does not wrap it refused the task, or
	// the task completed (a failed task's error), its callbacks run.
	ErrTaskPending = errors.New("scheduler: task still pending")
)

// A TaskError is the error of a task whose implementation (or callback)
// returned an error or panicked. Error prints one line naming the task,
// its codelet, the worker and the cause; a panic's stack stays in Stack
// (and in the trace's event of the task), out of the message.
type TaskError struct {
	// Codelet is the codelet's Name.
	Codelet string
	// Task is the task's id in traces (0 when statistics are off).
	Task uint64
	// Tag is the task's tag, 0 when it has none.
	Tag Tag
	// Context is the name of the scheduling context the task was
	// submitted to, "" for the scheduler's global one.
	Context string
	// Worker is the id of the worker that ran the task, -1 when the
	// error did not come from a worker (a callback run at submission).
	Worker int
	// Rank and Size are the failing member's rank in the task's team
	// and the team's size (Call.Rank, Call.Size); Size is 0 or 1 for a
	// task that one worker runs.
	Rank, Size int
	// Err is the error returned, or a description of the panic value.
	Err error
	// Panicked reports whether the implementation panicked.
	Panicked bool
	// Stack is the goroutine stack at the panic; empty for returned errors.
	Stack string
	// Site is where the implementation panicked, "file.go:LINE" (the
	// first frame of Stack below the panic outside the Go runtime);
	// empty for returned errors, or when Stack does not say.
	Site string
}

// Error implements error: one line, "scheduler: task #7 (tag 3) of
// codelet "potrf" in context "liba" failed on worker 1: not positive
// definite" (no context for the global one), or for a panic "...
// panicked on worker 1 at potrf.go:42: ...".
func (e *TaskError) Error() string {
	var b strings.Builder
	b.WriteString("scheduler: task")
	if e.Task != 0 {
		fmt.Fprintf(&b, " #%d", e.Task)
	}
	if e.Tag != 0 {
		fmt.Fprintf(&b, " (tag %d)", e.Tag)
	}
	fmt.Fprintf(&b, " of codelet %q ", e.Codelet)
	if e.Context != "" {
		fmt.Fprintf(&b, "in context %q ", e.Context)
	}
	if e.Panicked {
		b.WriteString("panicked")
	} else {
		b.WriteString("failed")
	}
	if e.Worker >= 0 {
		fmt.Fprintf(&b, " on worker %d", e.Worker)
	}
	if e.Size > 1 {
		fmt.Fprintf(&b, " (team rank %d of %d)", e.Rank, e.Size)
	}
	if e.Site != "" {
		fmt.Fprintf(&b, " at %s", e.Site)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

// panicSite returns "file.go:LINE" of the frame that panicked, read
// from a stack of debug.Stack taken while recovering: the first frame
// after the last "panic(" that is not the runtime's (a nil map's write
// or an index out of range panics in runtime frames called by the
// user's). "" when the stack has no such frame.
func panicSite(stack string) string {
	lines := strings.Split(stack, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "panic(") {
			start = i
		}
	}
	if start < 0 {
		return ""
	}
	// Each frame is two lines: the function, then "\tFILE:LINE +0x..".
	for i := start + 2; i+1 < len(lines); i += 2 {
		if fn := lines[i]; fn == "" || strings.HasPrefix(fn, "runtime.") {
			continue
		}
		loc, _, _ := strings.Cut(strings.TrimSpace(lines[i+1]), " ")
		if _, file := path.Split(loc); strings.Contains(file, ".go:") {
			return file
		}
		return ""
	}
	return ""
}

// Unwrap returns the task's own error.
func (e *TaskError) Unwrap() error { return e.Err }

// canceledError is the error of a canceled task; cause is the error of
// the task that failed (never another canceledError, so chains of
// cancellations do not grow messages).
type canceledError struct {
	name  string
	cause error
	// unstarted: canceled because its CancelOn context ended (cause is
	// that context's cause), not because a predecessor failed.
	unstarted bool
	// via names the task canceled by its CancelOn context when this one
	// was canceled because it depends on that task (cause is then that
	// context's cause).
	via string
	// atClose: canceled by Close because nothing can run it (cause says
	// why: no worker is left for it, its team cannot form), not because
	// a predecessor failed.
	atClose bool
	// noWorker: canceled when the last worker left the scheduler (every
	// worker driven, every driver ended), as Close would have: nothing
	// can run it any more.
	noWorker bool
}

func (e *canceledError) Error() string {
	msg := e.cause.Error()
	for i := 0; i < len(msg); i++ {
		if msg[i] == '\n' {
			msg = msg[:i]
			break
		}
	}
	if e.unstarted {
		return fmt.Sprintf("scheduler: task %q canceled before it started: %s", e.name, msg)
	}
	if e.atClose {
		return fmt.Sprintf("scheduler: task %q canceled at Close: %s", e.name, msg)
	}
	if e.noWorker {
		return fmt.Sprintf("scheduler: task %q canceled when the last worker left the scheduler: %s", e.name, msg)
	}
	if errors.Is(e.cause, ErrNotSubmitted) {
		// Nothing failed: Close canceled a wait that no submission could
		// end any more (a tag no task carries, a task never submitted),
		// this task's or that of a task it depends on.
		return fmt.Sprintf("scheduler: task %q canceled at Close: it waited, itself or through a task it depends on, for a task never submitted: %s",
			e.name, strings.TrimPrefix(msg, ErrNotSubmitted.Error()+": "))
	}
	if e.via != "" {
		return fmt.Sprintf("scheduler: task %q canceled: task %q, which it depends on, was canceled before it started: %s", e.name, e.via, msg)
	}
	return fmt.Sprintf("scheduler: task %q canceled: a task it depends on failed: %s", e.name, msg)
}

func (e *canceledError) Unwrap() []error { return []error{ErrCanceled, e.cause} }

// ctxErr is ctx's error, with its cause when the context was canceled with
// one (context.WithCancelCause): errors.Is still finds context.Canceled,
// and the message says why.
func ctxErr(ctx context.Context) error { return ctxerr.Of(ctx) }

// contextName is the name TaskError gives t's context: "" for the
// global one.
func (t *Task) contextName() string {
	if t.Context == nil || t.s == nil || t.Context == t.s.cx.global {
		return ""
	}
	return t.Context.name
}
