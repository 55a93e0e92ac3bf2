package hypervisor

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/pzgo/pz/internal/atomicf"
	"github.com/pzgo/pz/internal/latest"
	"github.com/pzgo/pz/scheduler"
)

// Sentinel errors.
var (
	// ErrBadOption is returned by New for a nil scheduler or an invalid
	// option or environment variable (policy name, trigger, duration,
	// speed gap, worker id); the message names the option or variable
	// and its value. PolicyByName and ParseTrigger return it for what
	// they refuse, AnnounceTasks for a nil codelet or a negative count,
	// and AppDriven.OnTag for tag 0 or fewer than one worker.
	ErrBadOption = errors.New("hypervisor: invalid option")
	// ErrBadContext is returned by Register for a context of another
	// scheduler or a deleted one, the global context, a context nested
	// in (or holding) one already registered, or limits that contradict
	// each other or the scheduler (a Min above its workers, or the
	// registered contexts' minimums adding up to more, a Max below the
	// workers the context holds, TotalFlops negative, NaN or +Inf); by SetTotalFlops and AddTotalFlops for
	// such flops or a context not registered; and by SetTotalFlops,
	// AddTotalFlops and AnnounceTasks for a context not registered, or
	// registered and then deleted (the error wraps
	// scheduler.ErrContextDeleted too); and by AppDriven.OnTag for a nil
	// context, the same context twice, or contexts of two schedulers.
	// Register after the scheduler's Close returns scheduler.ErrClosed.
	ErrBadContext = errors.New("hypervisor: invalid context")
	// ErrClosed is returned by Register after the hypervisor's Close:
	// a closed hypervisor resizes nothing.
	ErrClosed = errors.New("hypervisor: closed")
	// ErrPolicyPanic is what Err and Close return once the policy's
	// code - its Resize, a hook, Feedback.Rejected - or WithOnResize's
	// function panicked: the hypervisor recovered the panic (the worker
	// that ran it goes on with its tasks), logged it with its stack, and
	// calls the policy no more, so it resizes nothing more. The error
	// names the policy, where it panicked and the panic's value and site.
	ErrPolicyPanic = errors.New("hypervisor: the policy panicked")
	// ErrDecisionDropped is returned by Close when a decision pending
	// when it was called (asked for by a hook, or by a trigger, while
	// another decision ran) could not run: the scheduler was closed
	// before the hypervisor, or a later New replaced it. The error names
	// the decision's triggers, how many requests the policy had due
	// (AppDriven.Due) and why it did not run. A decision that ran and
	// whose moves were refused (see Limits) is no such error.
	ErrDecisionDropped = errors.New("hypervisor: a pending decision was dropped")
)

// Trigger says what makes the hypervisor consider resizing.
type Trigger uint8

const (
	// TriggerIdle considers a resize when a worker has been idle for
	// longer than its threshold (WithMaxIdle, WithWorkerMaxIdle).
	TriggerIdle Trigger = 1 << iota
	// TriggerSpeed considers a resize at the end of each sampling window
	// (WithWindow), from the instant speeds measured over it.
	TriggerSpeed
	// TriggerHook is the trigger of a resize a policy's hook asked for
	// (never configured: hooks always may).
	TriggerHook
)

// String returns "idle", "speed", "idle,speed", "hook" or "none".
func (t Trigger) String() string {
	var parts []string
	if t&TriggerIdle != 0 {
		parts = append(parts, "idle")
	}
	if t&TriggerSpeed != 0 {
		parts = append(parts, "speed")
	}
	if t&TriggerHook != 0 {
		parts = append(parts, "hook")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// ParseTrigger parses "idle", "speed", "idle,speed" (or "both") and
// "none".
func ParseTrigger(s string) (Trigger, error) {
	var t Trigger
	for _, p := range strings.Split(s, ",") {
		switch strings.TrimSpace(p) {
		case "idle":
			t |= TriggerIdle
		case "speed":
			t |= TriggerSpeed
		case "both":
			t |= TriggerIdle | TriggerSpeed
		case "none":
		default:
			return 0, fmt.Errorf("%w: trigger %q: want idle, speed, idle,speed or none", ErrBadOption, s)
		}
	}
	return t, nil
}

// Limits bound the size of a registered context and declare its work.
type Limits struct {
	// Min and Max bound the number of workers the hypervisor leaves in
	// the context (Max 0: no bound): it moves no worker out of a context
	// at its Min nor into one at its Max. Whatever Min says, a context
	// with pending tasks keeps at least one worker; with Min 0, one with
	// none pending (between two phases) may be left without workers,
	// and gets some back only from the hypervisor's later moves (not
	// after Close). The hypervisor moves
	// workers only between registered contexts, so Register refuses a
	// Max below the workers the context holds (the hypervisor does not
	// move workers out to honour a Max), while a context below its Min is accepted
	// (an empty context waiting for workers, say) and grows only as
	// workers are moved in. The Max values may add up to fewer than the
	// scheduler's workers: those outside the registered contexts (in
	// the global context, or a context not registered) stay where they
	// are.
	Min, Max int
	// TotalFlops is the context's whole work, for gflops_rate (0:
	// unknown; the context then keeps its workers under gflops_rate).
	// It must be finite and at least 0.
	TotalFlops float64
}

// A Resize is one worker the hypervisor moved.
type Resize struct {
	// At is the time since the hypervisor started.
	At time.Duration
	// Worker is the worker's id; From and To the contexts' names.
	Worker   int
	From, To string
	// Policy is the deciding policy's name; Trigger what triggered it.
	Policy  string
	Trigger Trigger
}

// ctxCounters are the hooks' counters of one context.
type ctxCounters struct {
	pushed, popped, done atomic.Int64
	busyNs               atomic.Int64
	flops                atomicf.Float64
	// By worker kind: the flops done and the time spent by workers of
	// that kind (for the speeds per kind of feft).
	kflops []atomicf.Float64
	kbusy  []atomic.Int64
	// speed mirrors the context's sample.speed, written by the decision
	// that rolls the window, so that Counters reads it without
	// Hypervisor.mu: WithOnResize's function and a policy's Resize run
	// under mu and may call Counters.
	speed atomic.Uint64 // math.Float64bits
	// noFlopsWarned is set once the warning that the context declared
	// TotalFlops but its tasks do none is logged.
	noFlopsWarned atomic.Bool
}

// workerCounters are the hooks' counters of one worker.
type workerCounters struct {
	idleSince atomic.Int64 // ns since the hypervisor's epoch; 0 when busy
	idleNs    atomic.Int64 // completed idle periods
	done      atomic.Int64
	busyNs    atomic.Int64
	flops     atomicf.Float64
	speed     atomic.Uint64 // math.Float64bits of wSample's speed (see ctxCounters.speed)
	// pastIdle is set when the current idle period reached the worker's
	// threshold (an event for the idle backoff, see quiet).
	pastIdle atomic.Bool
}

// sample is the start of the current sampling window of a context or a
// worker; guarded by Hypervisor.mu.
type sample struct {
	at      int64
	flops   float64
	workers int
	speed   float64 // flop/s over the last complete window
	wspeed  float64 // speed per worker over it
	done    int64   // tasks completed at the window's start
	tspeed  float64 // tasks/s over the last complete window
}

// A Hypervisor watches the contexts and workers of a scheduler through
// its Monitor hooks and resizes the registered contexts - moves workers
// between them - as its policy decides, when a trigger fires. Decisions
// run on the worker goroutine whose hook triggered them, one at a time
// (a worker that finds a decision under way goes on without waiting);
// moves are applied by each worker at its next safe point. It owns no
// goroutine. All methods are safe for concurrent use.
type Hypervisor struct {
	s     *scheduler.Scheduler
	cfg   config
	pol   Policy
	hooks Hooks
	epoch time.Time

	ctrs    atomic.Pointer[[]*ctxCounters] // by context id
	ctrMu   sync.Mutex                     // serializes growing ctrs
	workers []workerCounters

	regMu sync.Mutex
	reg   map[*scheduler.Context]Limits
	order []*scheduler.Context
	// resizes holds the latest resizeLog moves (a hypervisor that moves
	// workers for hours must not grow with each move) and counts them all.
	resizes latest.Log[Resize]

	mu sync.Mutex // one decision at a time (TryLock)
	// pending holds the triggers of decisions asked for while another
	// one held mu; the holder runs them before it lets go (see decide).
	pending atomic.Uint32
	// onBusy, when set (tests), is called after a decision was left
	// pending because another one held mu.
	onBusy func(Trigger)
	// onCloseWait, when set (tests), is called when Close finds a
	// decision under way, before it waits for it.
	onCloseWait  func()
	kinds        []scheduler.WorkerKind // by worker id
	nkinds       int
	types        taskTypes
	ctxSample    map[*scheduler.Context]*sample
	wSample      []sample
	lastWindow   atomic.Int64
	lastResize   atomic.Int64
	lastDecision atomic.Int64
	// quiet is the idle backoff: the least time (ns) between two
	// decisions of the idle and speed triggers while they move nothing
	// and nothing happens (see decide). 0: no backoff (the idle tick);
	// armed (1) from a decision's start until an event (stir) resets
	// it to 0; doubled, up to maxQuiet, by a decision that moved
	// nothing with no event since it started.
	quiet atomic.Int64
	// members is the membership the last decision saw (contexts,
	// whether each stopped submission, each worker's context); guarded
	// by mu. A change ends the backoff.
	members []int
	// parked is set while idle workers sleep until an event because
	// there was nothing to decide (NextIdleCycle); the event that ends
	// the backoff wakes them (unquiet).
	parked atomic.Bool
	closed atomic.Bool
	// tagged follows the tagged tasks whose hooks Close waits for.
	tagged taggedFlight
	// final is set, mu held, by Close once it ran the decisions pending
	// when it was called: no decision runs after it (decideLocked).
	// dropped, guarded by mu, is Close's ErrDecisionDropped, if any.
	final   bool
	dropped error
	// closeDone is closed when the first Close returns; a later Close
	// waits for it.
	closeDone chan struct{}
	// failed is set, and panicErr stored, when the policy's code
	// panicked (see ErrPolicyPanic): hooks and decisions stop.
	failed   atomic.Bool
	panicErr atomic.Pointer[error]
}

var _ scheduler.Monitor = (*Hypervisor)(nil)

// New attaches a hypervisor to s (replacing any Monitor) with the policy
// of WithPolicy, WithPolicyName or PZ_HYPERVISOR_POLICY (default idle).
// Register the contexts it may resize; Close detaches it. s must not be
// nil (ErrBadOption) nor closed (scheduler.ErrClosed).
func New(s *scheduler.Scheduler, opts ...Option) (*Hypervisor, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil scheduler", ErrBadOption)
	}
	if s.Closed() {
		return nil, fmt.Errorf("hypervisor: New: %w: a closed scheduler runs no more tasks; attach the hypervisor before closing it", scheduler.ErrClosed)
	}
	cfg, err := buildConfig(opts, len(s.Workers()))
	if err != nil {
		return nil, err
	}
	h := &Hypervisor{
		s: s, cfg: cfg, pol: cfg.policy, epoch: time.Now(), onBusy: cfg.onBusy, onCloseWait: cfg.onCloseWait,
		reg:       map[*scheduler.Context]Limits{},
		resizes:   latest.New[Resize](resizeLog),
		ctxSample: map[*scheduler.Context]*sample{},
		closeDone: make(chan struct{}),
	}
	h.hooks, _ = h.pol.(Hooks)
	_, h.types.on = h.pol.(taskTyped)
	h.types.m = map[typeKey]*typeCounters{}
	infos := s.Workers()
	n := len(infos)
	h.kinds = make([]scheduler.WorkerKind, n)
	for i, w := range infos {
		h.kinds[i] = w.Kind
		h.nkinds = max(h.nkinds, int(w.Kind)+1)
	}
	h.workers = make([]workerCounters, n)
	h.wSample = make([]sample, n)
	empty := []*ctxCounters{}
	h.ctrs.Store(&empty)
	s.SetMonitor(h, cfg.idleTick)
	return h, nil
}

// Policy returns the hypervisor's policy.
func (h *Hypervisor) Policy() Policy { return h.pol }

// Trigger returns the configured triggers.
func (h *Hypervisor) Trigger() Trigger { return h.cfg.trigger }

// Close detaches the hypervisor from the scheduler; hooks already
// running finish, later ones are not called, and it resizes nothing
// more (ResizeNow does nothing, Register returns ErrClosed). It removes the scheduler's
// monitor only while that is still this hypervisor: closing one that a
// later New replaced leaves the new one working. Idempotent. It returns
// Err: nil, unless the policy panicked (ErrPolicyPanic).
//
// A worker completes a task - its Wait and WaitAll may return, and the
// program call Close - before it calls the TaskExecuted hook. Close does
// not drop what such a hook asks for: the hooks of the tagged tasks
// (scheduler.WithTag) that had completed when Close was called, and
// of those whose TaskExecuted was under way, still run, with their
// decisions (an AppDriven.OnTag request of such a task is applied, or
// refused as it would be before Close), and Close waits for them. The
// hooks of tasks that complete after Close are not called.
//
// Close waits for those hooks and for a decision under way on another
// goroutine (a policy's Resize, Feedback.Rejected, WithOnResize's
// function) to return. Then it runs, once, the decision pending when it
// was called - asked for by a hook (an AppDriven.OnTag request whose
// task completed) or a trigger while another decision ran - so that no
// decision asked for before Close is dropped: its moves are made, or
// refused as they would be before Close. A pending decision that cannot
// run is reported: Close returns ErrPolicyPanic when the policy panics
// in it, and ErrDecisionDropped when the scheduler was closed first or
// a later New replaced this hypervisor. Once Close returns, the
// hypervisor posts no more moves and calls no more of the policy's
// code. Its wait is therefore bounded by the policy's code, which must
// return, and by the workers' steps from a task's completion to its
// hook: Close takes no context.Context because it waits for nothing
// else. A Close called while another runs waits for it and returns the
// same error. It must not be
// called from the policy's Resize, from Feedback.Rejected, from
// WithOnResize's function, nor from a hook called for a tagged task's
// TaskExecuted, which would wait for themselves (call it from another
// hook, or from another goroutine). Moves posted before Close returns
// are applied by their workers at their next safe point, as always.
//
// The workers stay where the policy's last moves put them: a context it
// emptied (Limits.Min 0, no task pending at the time) keeps none, and
// tasks submitted to it after Close wait for workers (WaitAll reports
// scheduler.ErrNoWorkers at its deadline) until the program moves some
// back (Scheduler.MoveWorkers). A Limits.Min of 1 keeps one there.
func (h *Hypervisor) Close() error {
	if !h.closed.CompareAndSwap(false, true) {
		<-h.closeDone
		return h.closeErr()
	}
	defer close(h.closeDone)
	seen := false // onCloseWait was called
	// A worker that loaded the monitor before a task completed calls
	// its TaskExecuted even once removed; one that did not see this
	// hypervisor (a later New replaced it) never will: no wait then.
	removed := h.s.RemoveMonitor(h)
	if h.cfg.onClosing != nil {
		h.cfg.onClosing()
	}
	if idle := h.tagged.close(); idle != nil && removed {
		if h.mu.TryLock() {
			h.mu.Unlock()
		} else if h.onCloseWait != nil {
			h.onCloseWait()
			seen = true
		}
		<-idle
	}
	h.warnUnsubmitted()
	// Wait for the decision in flight: it holds mu. Once closed, the
	// holder leaves the decisions pending to this (drain); they run
	// here, and none after (final, checked by decideLocked).
	if !h.mu.TryLock() {
		if h.onCloseWait != nil && !seen {
			h.onCloseWait()
		}
		h.mu.Lock()
	}
	h.runPendingLocked(removed)
	h.final = true
	h.mu.Unlock()
	return h.closeErr()
}

// closeErr is what Close returns: Err, and the decision it dropped.
func (h *Hypervisor) closeErr() error {
	h.mu.Lock()
	dropped := h.dropped
	h.mu.Unlock()
	if dropped == nil {
		return h.Err()
	}
	return errors.Join(h.Err(), dropped)
}

// runPendingLocked runs the decision pending at Close, if any, or
// records in dropped why it cannot run; h.mu is held. removed reports
// whether the scheduler's monitor was still this hypervisor.
func (h *Hypervisor) runPendingLocked(removed bool) {
	p := Trigger(h.pending.Swap(0))
	if p == 0 || h.failed.Load() {
		return // nothing pending, or the policy panicked (Err says so)
	}
	why := ""
	switch {
	case h.s.Closed():
		why = "the scheduler was closed before the hypervisor (close the hypervisor first)"
	case !removed:
		why = "a later New replaced this hypervisor (close it before attaching another)"
	default:
		h.lastDecision.Store(h.now())
		h.decideLocked(p)
		return
	}
	due := ""
	if d, ok := h.pol.(interface{ Due() int }); ok {
		due = fmt.Sprintf(", %d request(s) of policy %q due", d.Due(), h.pol.Name())
	}
	h.dropped = fmt.Errorf("hypervisor: Close: %w (triggers %v%s): %s", ErrDecisionDropped, p, due, why)
	h.cfg.log.Warn("hypervisor: Close dropped a pending decision", zap.Stringer("trigger", p), zap.String("why", why), zap.Error(h.dropped))
}

// warnUnsubmitted logs (Warn) each type of task announced with
// AnnounceTasks of which fewer were submitted than announced: teft
// planned for those tasks all along, holding workers for a context
// whose work never came.
func (h *Hypervisor) warnUnsubmitted() {
	if !h.types.on {
		return // submissions are counted for a policy of task types only
	}
	h.types.mu.Lock()
	defer h.types.mu.Unlock()
	for _, k := range h.types.order {
		tc := h.types.m[k]
		if tc.announced > tc.pushed {
			h.cfg.log.Warn("hypervisor: tasks announced were never submitted; teft planned workers for them (announce only the tasks a context will submit)",
				zap.String("context", k.c.Name()), zap.String("codelet", k.cl.Name),
				zap.Int64("announced", tc.announced), zap.Int64("submitted", tc.pushed))
		}
	}
}

// Err returns nil, or, once the policy's code (Resize, a hook,
// Feedback.Rejected) or WithOnResize's function panicked, an error
// wrapping ErrPolicyPanic that says where and why: the hypervisor then
// calls the policy no more and resizes nothing more, while the
// scheduler runs its tasks on in the contexts as they are.
func (h *Hypervisor) Err() error {
	if p := h.panicErr.Load(); p != nil {
		return *p
	}
	return nil
}

// recovered, deferred around a call of the policy's code (in names the
// call), turns a panic into Err (see panicked). It must be the deferred
// function itself, for recover to stop the panic.
func (h *Hypervisor) recovered(in string) {
	if r := recover(); r != nil {
		h.panicked(in, r)
	}
}

// panicked records the panic r of the policy's code in in: Err returns
// it from now on, it is logged with its stack, and the policy is not
// called again. It runs in the deferred function that recovered r.
func (h *Hypervisor) panicked(in string, r any) {
	err := fmt.Errorf("%w: policy %q panicked in %s at %s: %v; it is called no more and the hypervisor resizes nothing more (the tasks run on in their contexts): fix the policy",
		ErrPolicyPanic, h.pol.Name(), in, panicSite(), r)
	if h.panicErr.CompareAndSwap(nil, &err) {
		h.cfg.log.Error("hypervisor: the policy panicked; it is called no more", zap.String("policy", h.pol.Name()),
			zap.String("in", in), zap.Any("panic", r), zap.String("stack", string(debug.Stack())))
	}
	h.failed.Store(true)
}

// panicSite returns "file.go:line" of the function that panicked, seen
// from a deferred function running for the panic (the first frame
// outside the runtime below runtime.gopanic), or "an unknown place".
func panicSite() string {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	inPanic := false
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			inPanic = true
		case inPanic && !strings.HasPrefix(f.Function, "runtime."):
			return fmt.Sprintf("%s:%d", filepath.Base(f.File), f.Line)
		}
		if !more {
			return "an unknown place"
		}
	}
}

// stopped reports whether the policy must not be called: the
// hypervisor is closed, or the policy panicked.
func (h *Hypervisor) stopped() bool { return h.closed.Load() || h.failed.Load() }

// The hooks of the policy, each recovering a panic (see recovered).
func (h *Hypervisor) hookPushed(c *scheduler.Context, t *scheduler.Task) (resize bool) {
	defer h.recovered("its TaskPushed hook")
	return h.hooks.TaskPushed(c, t)
}

func (h *Hypervisor) hookPopped(c *scheduler.Context, t *scheduler.Task, worker int) (resize bool) {
	defer h.recovered("its TaskPopped hook")
	return h.hooks.TaskPopped(c, t, worker)
}

func (h *Hypervisor) hookIdleCycle(c *scheduler.Context, worker int, idle time.Duration) (resize bool) {
	defer h.recovered("its IdleCycle hook")
	return h.hooks.IdleCycle(c, worker, idle)
}

func (h *Hypervisor) hookIdleEnd(c *scheduler.Context, worker int, idle time.Duration) (resize bool) {
	defer h.recovered("its IdleEnd hook")
	return h.hooks.IdleEnd(c, worker, idle)
}

func (h *Hypervisor) hookExecuted(c *scheduler.Context, t *scheduler.Task, worker int, elapsed time.Duration) (resize bool) {
	defer h.recovered("its TaskExecuted hook")
	return h.hooks.TaskExecuted(c, t, worker, elapsed)
}

// Register lets the hypervisor resize c within lim. Registering again
// updates the limits. The registered contexts must be disjoint: a
// worker is in at most one of them. So the global context (which holds
// every worker) is refused, and so is a context nested in one already
// registered or holding one (the error names both); register siblings,
// or the children alone. It refuses limits that contradict each other
// or the scheduler (ErrBadContext): a Min or Max negative, a Min above
// Max or the scheduler's workers, or a Min that brings the sum of the
// registered (and not deleted) contexts' minimums above the scheduler's
// workers; and a Max below the workers c holds (those moving there
// included): the hypervisor does not move workers out to honour a Max,
// so move them out first (Scheduler.MoveWorkers) or raise Max. The
// registered contexts' Max values may add up to fewer than the
// scheduler's workers: the hypervisor never moves the workers outside
// the registered contexts. After the scheduler's Close,
// Register returns scheduler.ErrClosed.
func (h *Hypervisor) Register(c *scheduler.Context, lim Limits) error {
	switch {
	case c == nil || c.Scheduler() != h.s:
		return fmt.Errorf("%w: %v is not a context of the hypervisor's scheduler", ErrBadContext, c)
	case c.Parent() == nil:
		return fmt.Errorf("%w: %v is the global context, which holds every worker; register the contexts to resize (created with NewContext) instead", ErrBadContext, c)
	case lim.Min < 0:
		return fmt.Errorf("%w: %v: Limits.Min %d is negative (0: no minimum)", ErrBadContext, c, lim.Min)
	case lim.Max < 0:
		return fmt.Errorf("%w: %v: Limits.Max %d is negative (0: no bound)", ErrBadContext, c, lim.Max)
	case lim.Max > 0 && lim.Min > lim.Max:
		return fmt.Errorf("%w: %v: Limits.Min %d is above Limits.Max %d", ErrBadContext, c, lim.Min, lim.Max)
	case lim.Min > len(h.workers):
		return fmt.Errorf("%w: %v: Limits.Min %d is above the scheduler's %d workers", ErrBadContext, c, lim.Min, len(h.workers))
	}
	if n := len(c.Workers()); lim.Max > 0 && n > lim.Max {
		return fmt.Errorf("%w: %v: Limits.Max %d is below the %d workers it holds, and the hypervisor does not move workers out to honour a Max; move %d out first (Scheduler.MoveWorkers) or raise Max",
			ErrBadContext, c, lim.Max, n, n-lim.Max)
	}
	if err := checkFlops(lim.TotalFlops); err != nil {
		return fmt.Errorf("%w: %v: Limits.TotalFlops %g %s", ErrBadContext, c, lim.TotalFlops, err)
	}
	if h.closed.Load() {
		return fmt.Errorf("hypervisor: Register(%v): %w: it no longer watches the scheduler; register with a new one (New)", c, ErrClosed)
	}
	if schedulerClosed(c) {
		return fmt.Errorf("hypervisor: Register(%v): %w: a closed scheduler runs no more tasks; register contexts before closing it", c, scheduler.ErrClosed)
	}
	if isDeleted(c) {
		return fmt.Errorf("%w: %v is deleted", ErrBadContext, c)
	}
	h.regMu.Lock()
	defer h.regMu.Unlock()
	if _, ok := h.reg[c]; !ok {
		for _, o := range h.order {
			switch {
			case isIn(c, o):
				return fmt.Errorf("%w: %v is nested in %v, which is registered: a worker would be in both; register one of them", ErrBadContext, c, o)
			case isIn(o, c):
				return fmt.Errorf("%w: %v holds %v, which is registered: a worker would be in both; register one of them", ErrBadContext, c, o)
			}
		}
	}
	if lim.Min > 0 {
		sum, others := lim.Min, []string(nil)
		for _, o := range h.order {
			if m := h.reg[o].Min; o != c && m > 0 && !isDeleted(o) {
				sum += m
				others = append(others, fmt.Sprintf("%v %d", o, m))
			}
		}
		if sum > len(h.workers) {
			return fmt.Errorf("%w: %v: Limits.Min %d and the minimums of the registered %s add up to %d, above the scheduler's %d workers: no distribution can honour them; lower a minimum",
				ErrBadContext, c, lim.Min, strings.Join(others, ", "), sum, len(h.workers))
		}
	}
	if _, ok := h.reg[c]; !ok {
		h.order = append(h.order, c)
	}
	h.reg[c] = lim
	h.stir()
	h.limitsChanged()
	return nil
}

// limitsChanger is implemented by a policy that wants to hear of
// Register and Unregister (app_driven: its refused requests wait for a
// change, see AppDriven). A policy that embeds *AppDriven keeps it; one
// that wraps it otherwise retries its refused requests every 100 ms.
type limitsChanger interface{ limitsChanged() }

// limitsChanged tells the policy that the registered limits changed.
func (h *Hypervisor) limitsChanged() {
	if lc, ok := h.pol.(limitsChanger); ok {
		lc.limitsChanged()
	}
}

// isDeleted reports whether c was deleted (Context.Delete, once its
// last task completed).
func isDeleted(c *scheduler.Context) bool {
	select {
	case <-c.Deleted():
		return true
	default:
		return false
	}
}

// schedulerClosed reports whether Close was called on c's scheduler.
func schedulerClosed(c *scheduler.Context) bool { return c.Scheduler().Closed() }

// registered returns an error when c is not registered, or was
// deleted (it stays registered until Unregister); op names the call.
// h.regMu is held.
func (h *Hypervisor) registeredLocked(op string, c *scheduler.Context) (Limits, error) {
	lim, ok := h.reg[c]
	switch {
	case !ok:
		return lim, fmt.Errorf("%w: %s: %v is not registered; Register it first", ErrBadContext, op, c)
	case isDeleted(c):
		return lim, fmt.Errorf("%w: %s: %v was deleted (%w); it does no more work: Unregister it", ErrBadContext, op, c, scheduler.ErrContextDeleted)
	}
	return lim, nil
}

// isIn reports whether c is a or nested in a.
func isIn(c, a *scheduler.Context) bool {
	for x := c; x != nil; x = x.Parent() {
		if x == a {
			return true
		}
	}
	return false
}

// Unregister stops resizing c.
func (h *Hypervisor) Unregister(c *scheduler.Context) {
	h.regMu.Lock()
	defer h.regMu.Unlock()
	defer h.limitsChanged()
	defer h.stir()
	delete(h.reg, c)
	h.order = slices.DeleteFunc(h.order, func(x *scheduler.Context) bool { return x == c })
}

// checkFlops returns an error (a phrase) for flops that are not a
// finite amount of work at least 0.
func checkFlops(f float64) error {
	if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return errors.New("is not a finite number of flops at least 0")
	}
	return nil
}

// SetTotalFlops declares c's total work (see Limits.TotalFlops). It
// returns ErrBadContext for flops negative, NaN or infinite, or a
// context not registered or deleted (wrapping
// scheduler.ErrContextDeleted), and then changes nothing.
func (h *Hypervisor) SetTotalFlops(c *scheduler.Context, flops float64) error {
	if err := checkFlops(flops); err != nil {
		return fmt.Errorf("%w: SetTotalFlops(%v, %g): %g %s", ErrBadContext, c, flops, flops, err)
	}
	h.regMu.Lock()
	defer h.regMu.Unlock()
	lim, err := h.registeredLocked(fmt.Sprintf("SetTotalFlops(%v, %g)", c, flops), c)
	if err != nil {
		return err
	}
	lim.TotalFlops = flops
	h.reg[c] = lim
	h.stir()
	return nil
}

// AddTotalFlops corrects c's declared total work by delta flops (more
// work found, or less, during the run; StarPU's
// sc_hypervisor_update_diff_total_flops). The total never goes below 0.
// It returns ErrBadContext for a NaN or infinite delta, or a context
// not registered or deleted, and then changes nothing.
func (h *Hypervisor) AddTotalFlops(c *scheduler.Context, delta float64) error {
	if math.IsNaN(delta) || math.IsInf(delta, 0) {
		return fmt.Errorf("%w: AddTotalFlops(%v, %g): not a finite number of flops", ErrBadContext, c, delta)
	}
	h.regMu.Lock()
	defer h.regMu.Unlock()
	lim, err := h.registeredLocked(fmt.Sprintf("AddTotalFlops(%v, %g)", c, delta), c)
	if err != nil {
		return err
	}
	lim.TotalFlops = max(lim.TotalFlops+delta, 0)
	if math.IsInf(lim.TotalFlops, 1) {
		return fmt.Errorf("%w: AddTotalFlops(%v, %g): the total overflows", ErrBadContext, c, delta)
	}
	h.reg[c] = lim
	h.stir()
	return nil
}

// resizeLog is how many of the latest moves Resizes returns.
const resizeLog = 4096

// Resizes returns the moves made so far, in the order made: the latest
// 4,096 (ResizeCount counts them all), so that a hypervisor that moves
// workers for hours stays flat in memory.
func (h *Hypervisor) Resizes() []Resize {
	h.regMu.Lock()
	defer h.regMu.Unlock()
	return h.resizes.Latest()
}

// ResizeCount returns how many moves were made so far.
func (h *Hypervisor) ResizeCount() int {
	h.regMu.Lock()
	defer h.regMu.Unlock()
	return h.resizes.Total()
}

func (h *Hypervisor) now() int64 { return int64(time.Since(h.epoch)) | 1 }

// counters returns c's counters, creating them on first use.
func (h *Hypervisor) counters(c *scheduler.Context) *ctxCounters {
	id := c.ID()
	if cs := *h.ctrs.Load(); id < len(cs) && cs[id] != nil {
		return cs[id]
	}
	h.ctrMu.Lock()
	defer h.ctrMu.Unlock()
	cs := *h.ctrs.Load()
	if id < len(cs) && cs[id] != nil {
		return cs[id]
	}
	grown := make([]*ctxCounters, max(len(cs), id+1))
	copy(grown, cs)
	grown[id] = &ctxCounters{kflops: make([]atomicf.Float64, h.nkinds), kbusy: make([]atomic.Int64, h.nkinds)}
	h.ctrs.Store(&grown)
	return grown[id]
}

// ContextCounters are what the hooks counted for one context.
type ContextCounters struct {
	// Pushed, Popped and Done count tasks queued, taken by a worker and
	// completed in the context.
	Pushed, Popped, Done int64
	// Flops is the sum of Codelet.Flops of the completed tasks.
	Flops float64
	// Busy is the workers' time spent on the context's tasks.
	Busy time.Duration
	// Speed is the instant speed (flop/s) over the last complete
	// sampling window, if the context is registered.
	Speed float64
}

// Counters returns c's counters (zero for nil). It takes no lock that a decision
// holds, so WithOnResize's function, a policy's Resize and its hooks may
// call it.
func (h *Hypervisor) Counters(c *scheduler.Context) ContextCounters {
	if c == nil {
		return ContextCounters{}
	}
	k := h.counters(c)
	return ContextCounters{Pushed: k.pushed.Load(), Popped: k.popped.Load(), Done: k.done.Load(),
		Flops: k.flops.Load(), Busy: time.Duration(k.busyNs.Load()), Speed: math.Float64frombits(k.speed.Load())}
}

// WorkerCounters are what the hooks counted for one worker.
type WorkerCounters struct {
	// Idle is the worker's idle time so far, including the current idle
	// period; IdleNow is the current idle period alone (0 when busy).
	Idle, IdleNow time.Duration
	// Done and Flops count the tasks it completed and their flops.
	Done  int64
	Flops float64
	// Busy is its time spent on tasks.
	Busy time.Duration
	// Speed is its instant speed (flop/s) over the last complete
	// sampling window.
	Speed float64
}

// Worker returns worker id's counters (zero for an unknown id). Like
// Counters, it may be called while a decision runs.
func (h *Hypervisor) Worker(id int) WorkerCounters {
	if id < 0 || id >= len(h.workers) {
		return WorkerCounters{}
	}
	w := &h.workers[id]
	var now time.Duration
	if since := w.idleSince.Load(); since != 0 {
		now = time.Duration(h.now() - since)
	}
	return WorkerCounters{Idle: time.Duration(w.idleNs.Load()) + now, IdleNow: now, Done: w.done.Load(),
		Flops: w.flops.Load(), Busy: time.Duration(w.busyNs.Load()), Speed: math.Float64frombits(w.speed.Load())}
}

// TaskPushed implements scheduler.Monitor.
func (h *Hypervisor) TaskPushed(c *scheduler.Context, t *scheduler.Task) {
	if h.closed.Load() {
		return
	}
	h.counters(c).pushed.Add(1)
	if h.types.on {
		h.types.pushed(c, t)
	}
	h.stir()
	if h.hooks != nil && !h.failed.Load() && h.hookPushed(c, t) {
		h.decide(TriggerHook)
	}
}

// TaskPopped implements scheduler.Monitor.
func (h *Hypervisor) TaskPopped(c *scheduler.Context, t *scheduler.Task, worker int) {
	if h.closed.Load() {
		return
	}
	h.counters(c).popped.Add(1)
	if h.hooks != nil && t.Tag != 0 {
		h.tagged.popped(t)
	}
	h.stir()
	if h.hooks != nil && !h.failed.Load() && h.hookPopped(c, t, worker) {
		h.decide(TriggerHook)
	}
}

// IdleCycle implements scheduler.Monitor.
func (h *Hypervisor) IdleCycle(c *scheduler.Context, worker int, idle time.Duration) {
	if h.closed.Load() || worker >= len(h.workers) {
		return
	}
	w := &h.workers[worker]
	if w.idleSince.Load() == 0 {
		w.idleSince.Store(h.now() - int64(idle))
		h.stir()
	}
	if idle >= h.cfg.maxIdleOf(worker) && !w.pastIdle.Load() {
		w.pastIdle.Store(true)
		h.stir()
	}
	if h.hooks != nil && !h.failed.Load() && h.hookIdleCycle(c, worker, idle) {
		h.decide(TriggerHook)
		return
	}
	if h.cfg.trigger&TriggerIdle != 0 && idle >= h.cfg.maxIdleOf(worker) {
		h.decide(TriggerIdle)
	}
	h.maybeWindow()
}

// IdleEnd implements scheduler.Monitor.
func (h *Hypervisor) IdleEnd(c *scheduler.Context, worker int, idle time.Duration) {
	if h.closed.Load() || worker >= len(h.workers) {
		return
	}
	w := &h.workers[worker]
	w.idleSince.Store(0)
	w.pastIdle.Store(false)
	w.idleNs.Add(int64(idle))
	h.stir()
	if h.hooks != nil && !h.failed.Load() && h.hookIdleEnd(c, worker, idle) {
		h.decide(TriggerHook)
	}
}

// TaskExecuted implements scheduler.Monitor.
func (h *Hypervisor) TaskExecuted(c *scheduler.Context, t *scheduler.Task, worker int, elapsed time.Duration) {
	if h.cfg.onExecuted != nil {
		h.cfg.onExecuted(t)
	}
	if h.hooks != nil && t.Tag != 0 {
		// A tagged task's hook may ask for a resize (AppDriven.OnTag):
		// it runs if the task completed before Close (see Close).
		if !h.tagged.executed(t) {
			return
		}
		defer h.tagged.finished()
	} else if h.closed.Load() {
		return
	}
	var f float64
	if fl := t.Codelet.Flops; fl != nil {
		f = fl(t)
	}
	k := h.counters(c)
	k.done.Add(1)
	k.busyNs.Add(int64(elapsed))
	k.flops.Add(f)
	if worker >= 0 && worker < len(h.workers) {
		w := &h.workers[worker]
		w.done.Add(1)
		w.busyNs.Add(int64(elapsed))
		w.flops.Add(f)
		kd := h.kinds[worker]
		k.kflops[kd].Add(f)
		k.kbusy[kd].Add(int64(elapsed))
		if h.types.on {
			h.types.executed(c, t, kd, elapsed, f)
		}
	}
	h.stir()
	if h.hooks != nil && !h.failed.Load() && h.hookExecuted(c, t, worker, elapsed) {
		if h.closed.Load() {
			// Close waits for this hook (a tagged task's): decide now,
			// not leaving the decision pending to a holder of mu that
			// Close may have stopped.
			h.decideNow()
			return
		}
		h.decide(TriggerHook)
		return
	}
	h.maybeWindow()
}

// decideNow runs the hook's decision and those pending, waiting for a
// decision under way.
func (h *Hypervisor) decideNow() {
	h.mu.Lock()
	h.lastDecision.Store(h.now())
	h.decideLocked(TriggerHook | Trigger(h.pending.Swap(0)))
	h.mu.Unlock()
}

// maybeWindow ends the sampling window when it is due and, with the
// speed trigger, considers a resize.
func (h *Hypervisor) maybeWindow() {
	if h.closed.Load() {
		return // a tagged task's hook after Close: no new decision
	}
	last := h.lastWindow.Load()
	if h.now()-last < max(int64(h.cfg.window), h.quiet.Load()) {
		return
	}
	if h.cfg.trigger&TriggerSpeed != 0 {
		h.decide(TriggerSpeed)
	} else if h.mu.TryLock() {
		h.view(TriggerSpeed) // refresh the speeds for Counters and views
		h.mu.Unlock()
	}
}

// ResizeNow runs the policy at once (waiting for a decision under way)
// and applies its moves; it returns the moves made. Decisions left
// pending meanwhile run before it returns. After Close it moves nothing
// and returns nil, as after the policy panicked (Err).
func (h *Hypervisor) ResizeNow() []Resize {
	if h.stopped() {
		return nil
	}
	h.mu.Lock()
	done := h.decideLocked(TriggerHook)
	h.mu.Unlock()
	h.drain() // the decisions asked for while this one ran
	return done
}

// decide runs the policy unless the last resize is too recent (for the
// idle and speed triggers). A worker that finds a decision under way
// does not wait: it leaves its trigger in h.pending, which the holder of
// h.mu runs before it lets go, so that no decision asked for - by a
// hook above all - is ever dropped.
//
// The asker sets the flag before it tries the lock, the holder looks at
// the flag after it unlocked: either the holder sees the flag, or the
// asker's TryLock comes after the unlock and succeeds.
func (h *Hypervisor) decide(why Trigger) {
	if h.failed.Load() {
		return
	}
	now := h.now()
	if why != TriggerHook {
		if last := h.lastResize.Load(); last != 0 && now-last < int64(h.cfg.minInterval) {
			return
		}
		// Idle workers would otherwise ask every idle tick; while
		// decisions move nothing and nothing happens, less and less
		// often (quiet).
		if now-h.lastDecision.Load() < max(int64(h.cfg.idleTick), h.quiet.Load()) {
			return
		}
	}
	h.pending.Or(uint32(why))
	if !h.drain() && h.onBusy != nil {
		h.onBusy(why)
	}
}

// drain runs the pending decisions if no other decision is under way;
// it reports whether it ran them (false: the holder of h.mu will). Once
// the hypervisor is closed it leaves them to Close, which runs them
// (see Close) and reports true.
func (h *Hypervisor) drain() bool {
	for h.mu.TryLock() {
		for !h.closed.Load() {
			p := Trigger(h.pending.Swap(0))
			if p == 0 {
				break
			}
			h.lastDecision.Store(h.now())
			h.decideLocked(p)
		}
		h.mu.Unlock()
		if h.closed.Load() || h.pending.Load() == 0 {
			return true
		}
	}
	return false
}

// decideLocked runs the policy once for the triggers in why; h.mu is
// held. A panic in the policy's code or WithOnResize's function stops
// the policy (see recovered); the moves posted before it stand.
func (h *Hypervisor) decideLocked(why Trigger) (done []Resize) {
	if h.failed.Load() || h.final {
		// Close ran the decisions pending when it was called: none
		// runs after it (a ResizeNow that passed its check before
		// Close, a hook under way at Close).
		return nil
	}
	quiet := h.arm(why)
	v := h.view(why)
	if len(v.Contexts) == 0 {
		// Nothing to resize; the backoff still grows, so that idle
		// workers park (NextIdleCycle) until a Register or another
		// event instead of asking every idle tick.
		h.settle(v, why, quiet, false)
		return nil
	}
	in := "Resize"
	defer func() {
		if h.failed.Load() {
			done = nil
		}
	}()
	defer func() {
		if r := recover(); r != nil {
			h.panicked(in, r)
		}
	}()
	moves := h.pol.Resize(v)
	in = "WithOnResize's function"
	done, rejected := h.apply(v, moves)
	if fb, ok := h.pol.(Feedback); ok {
		in = "Feedback.Rejected"
		fb.Rejected(v, rejected)
	}
	h.settle(v, why, quiet, len(done) > 0)
	// A decision of a hook or ResizeNow may change what idle workers
	// wait for (AppDriven's refused requests): those asleep until an
	// event look again.
	h.wakeParked()
	return done
}

// maxQuiet bounds the idle backoff: while nothing happens, the idle
// and speed triggers still run the policy at least this often.
const maxQuiet = 100 * time.Millisecond

// quietArmed is quiet's value from a decision's start until an event.
const quietArmed = 1

// stir ends the idle backoff: an event changed what decisions see. It
// writes only when there is a backoff to end, so that the hooks, on
// the path of every task, mostly just read.
func (h *Hypervisor) stir() {
	if h.quiet.Load() != 0 {
		h.unquiet()
	}
}

// unquiet ends the backoff and wakes the workers that sleep until an
// event (see NextIdleCycle): they decide again. A worker parks only
// after it set parked and then still saw the backoff at its bound, so
// either it sees the backoff ended or this sees parked.
func (h *Hypervisor) unquiet() {
	h.quiet.Store(0)
	h.wakeParked()
}

// wakeParked wakes the workers that sleep until an event, if any.
func (h *Hypervisor) wakeParked() {
	if h.parked.Load() && h.parked.CompareAndSwap(true, false) {
		h.s.WakeIdle()
	}
}

// idlePacer is scheduler.IdlePacer: a policy with Hooks that implements
// it says when its IdleCycle hook needs the next call (AppDriven); a
// policy with Hooks that does not gets it every idle tick.
type idlePacer = scheduler.IdlePacer

// NextIdleCycle implements scheduler.IdlePacer: an idle worker sleeps
// until the next moment at which something may be decided - its idle
// threshold (idle trigger), the next decision while the backoff grows
// (idle trigger past the threshold, speed trigger at the end of a
// window, WithMinInterval after a resize), what the policy's hooks ask
// for (every idle tick for a policy with Hooks that is not an
// IdlePacer) - and, when there is none (the backoff reached its bound:
// decisions moved nothing and nothing happened), until an event ends
// the backoff and wakes it (WakeIdle). An idle program with its
// hypervisor open then costs no CPU. Before it answers 0 it asks the
// policy's NextIdleCycle again (a policy that is an IdlePacer is asked
// twice then), so that a decision made meanwhile is not missed.
func (h *Hypervisor) NextIdleCycle(c *scheduler.Context, worker int, idle time.Duration) (next time.Duration) {
	if h.cfg.onNextIdle != nil {
		defer func() { h.cfg.onNextIdle(worker, next) }()
	}
	if h.stopped() || worker < 0 || worker >= len(h.workers) {
		return 0
	}
	tick := h.cfg.idleTick
	now, q := h.now(), h.quiet.Load()
	best := time.Duration(0)
	at := func(d time.Duration) {
		if d <= 0 {
			d = tick // due now, but another decision ran or runs it
		}
		if best == 0 || d < best {
			best = d
		}
	}
	var pacer idlePacer
	if h.hooks != nil && !h.failed.Load() {
		p, ok := h.pol.(idlePacer)
		if !ok {
			return tick
		}
		pacer = p
		if d := p.NextIdleCycle(c, worker, idle); d > 0 {
			at(d)
		}
	}
	// The next decision of the idle or speed trigger, while the backoff
	// has not reached its bound.
	due := func(from int64) time.Duration {
		from = max(from, h.lastDecision.Load()+max(int64(tick), q))
		if last := h.lastResize.Load(); last != 0 {
			from = max(from, last+int64(h.cfg.minInterval))
		}
		return time.Duration(from - now)
	}
	if h.cfg.trigger&TriggerIdle != 0 {
		if th := h.cfg.maxIdleOf(worker); idle < th {
			at(th - idle)
		} else if q < int64(maxQuiet) {
			at(due(0))
		}
	}
	if h.cfg.trigger&TriggerSpeed != 0 && q < int64(maxQuiet) {
		at(due(h.lastWindow.Load() + max(int64(h.cfg.window), q)))
	}
	if best > 0 {
		return best
	}
	// Marked parked first, then the answers read again: an event or a
	// decision (which wake the parked workers) since the reads above
	// either sees the mark or is seen here. The policy's answer too: a
	// hook's or ResizeNow's decision in between may have left it
	// something due (AppDriven's refused request).
	h.parked.Store(true)
	if h.cfg.trigger&(TriggerIdle|TriggerSpeed) != 0 && h.quiet.Load() < int64(maxQuiet) {
		return tick // an event ended the backoff meanwhile
	}
	if pacer != nil {
		if d := pacer.NextIdleCycle(c, worker, idle); d > 0 {
			return d
		}
	}
	return 0
}

// arm returns the backoff a decision of the idle or speed trigger
// starts with, arming it when there is none (an event from now on
// resets it, see stir); h.mu is held. Decisions that include a hook's
// trigger do not take part (0).
func (h *Hypervisor) arm(why Trigger) int64 {
	if why&TriggerHook != 0 {
		return 0
	}
	if h.quiet.CompareAndSwap(0, quietArmed) {
		return quietArmed
	}
	return h.quiet.Load()
}

// settle updates the backoff after a decision; h.mu is held. A
// decision of the idle or speed trigger that moved nothing, with the
// membership it saw unchanged and no event since it started, doubles
// the backoff (from two idle ticks, up to maxQuiet); a move, or a
// change of membership made outside the hypervisor, ends it.
func (h *Hypervisor) settle(v *View, why Trigger, quiet int64, moved bool) {
	members := make([]int, 0, 2*len(v.Contexts)+len(v.Workers))
	for _, c := range v.Contexts {
		stopped := 0
		if c.Context.Stopped() {
			stopped = 1
		}
		members = append(members, c.Context.ID(), stopped)
	}
	for _, w := range v.Workers {
		members = append(members, w.Context)
	}
	same := slices.Equal(members, h.members)
	h.members = members
	switch {
	case moved || !same:
		h.unquiet()
	case quiet != 0:
		tick := int64(h.cfg.idleTick)
		h.quiet.CompareAndSwap(quiet, min(max(2*quiet, 2*tick), max(int64(maxQuiet), tick)))
	}
}

// view builds the policy's input; h.mu is held. It also rolls the
// sampling window when it is due.
func (h *Hypervisor) view(why Trigger) *View {
	now := h.now()
	roll := now-h.lastWindow.Load() >= int64(h.cfg.window)
	if roll {
		h.lastWindow.Store(now)
	}
	h.regMu.Lock()
	order := slices.Clone(h.order)
	lims := make([]Limits, len(order))
	for i, c := range order {
		lims[i] = h.reg[c]
	}
	h.regMu.Unlock()
	v := &View{Now: time.Duration(now), Trigger: why, Workers: make([]WorkerView, len(h.workers)), Logger: h.cfg.log}
	for i := range v.Workers {
		v.Workers[i] = WorkerView{ID: i, Kind: h.kinds[i], Context: -1, MaxIdle: h.cfg.maxIdleOf(i)}
	}
	for i, c := range order {
		select {
		case <-c.Deleted():
			continue
		default:
		}
		k := h.counters(c)
		ws := c.Workers()
		cv := ContextView{
			Context: c, Name: c.Name(), Workers: ws, Limits: lims[i],
			Pending: c.Pending(), MinWorkers: c.MinWorkers(), Ready: max(k.pushed.Load()-k.popped.Load(), 0),
			Done: k.done.Load(), FlopsDone: k.flops.Load(),
		}
		if busy := k.busyNs.Load(); busy > 0 {
			cv.BusySpeed = cv.FlopsDone / (float64(busy) / 1e9)
		}
		if cv.Limits.TotalFlops > 0 && cv.Done > 0 && cv.FlopsDone == 0 && k.noFlopsWarned.CompareAndSwap(false, true) {
			h.cfg.log.Warn("hypervisor: a context declared Limits.TotalFlops but its completed tasks did no flops (their Codelet.Flops is nil or returns 0): "+
				"its remaining work never goes down, so gflops_rate and feft keep it a worker until it stops taking tasks (StopSubmission, Delete); "+
				"give its codelets Flops, or use teft, which needs none",
				zap.String("context", cv.Name), zap.Float64("total_flops", cv.Limits.TotalFlops), zap.Int64("tasks_done", cv.Done))
		}
		cv.KindSpeed = make([]float64, h.nkinds)
		for kd := range cv.KindSpeed {
			if busy := k.kbusy[kd].Load(); busy > 0 {
				cv.KindSpeed[kd] = k.kflops[kd].Load() / (float64(busy) / 1e9)
			}
		}
		smp := h.ctxSample[c]
		if smp == nil {
			smp = &sample{at: now, flops: cv.FlopsDone, workers: len(ws), done: cv.Done}
			h.ctxSample[c] = smp
		} else if roll && now-smp.at >= int64(h.cfg.window) {
			// Over a whole window of its own: a sample taken between two
			// rolls (a context registered then) and rolled at once would
			// divide a task's flops by microseconds.
			smp.speed = (cv.FlopsDone - smp.flops) / (float64(now-smp.at) / 1e9)
			smp.tspeed = float64(cv.Done-smp.done) / (float64(now-smp.at) / 1e9)
			smp.wspeed = 0
			if n := max(smp.workers, len(ws)); n > 0 {
				smp.wspeed = smp.speed / float64(n)
			}
			smp.at, smp.flops, smp.workers, smp.done = now, cv.FlopsDone, len(ws), cv.Done
		}
		cv.Speed, cv.WorkerSpeed, cv.TaskSpeed = smp.speed, smp.wspeed, smp.tspeed
		k.speed.Store(math.Float64bits(smp.speed))
		idx := len(v.Contexts)
		v.Contexts = append(v.Contexts, cv)
		for _, w := range ws {
			if w < len(v.Workers) {
				v.Workers[w].Context = idx
			}
		}
	}
	for i := range v.Workers {
		wc := &h.workers[i]
		if since := wc.idleSince.Load(); since != 0 {
			v.Workers[i].Idle = time.Duration(now - since)
		}
		f := wc.flops.Load()
		ws := &h.wSample[i]
		if roll && now-ws.at >= int64(h.cfg.window) {
			ws.speed = (f - ws.flops) / (float64(now-ws.at) / 1e9)
			ws.at, ws.flops = now, f
			wc.speed.Store(math.Float64bits(ws.speed))
		}
		v.Workers[i].Speed = ws.speed
	}
	if h.types.on {
		v.Types = h.types.view(h.s, v.Contexts, h.nkinds)
	}
	return v
}

// apply validates the policy's moves against the limits and the current
// membership and posts them; h.mu is held. It returns the moves made and
// the moves it refused (each refusal is logged with its reason).
func (h *Hypervisor) apply(v *View, moves []Move) (done []Resize, rejected []Move) {
	count := make([]int, len(v.Contexts))
	for i, c := range v.Contexts {
		count[i] = len(c.Workers)
	}
	moved := map[int]bool{}
	reject := func(m Move, why string, fields ...zap.Field) {
		rejected = append(rejected, m)
		h.cfg.log.Info("hypervisor: move refused: "+why, append([]zap.Field{zap.String("policy", h.pol.Name()),
			zap.Int("worker", m.Worker), zap.Int("to", m.To)}, fields...)...)
	}
	for _, m := range moves {
		if m.Worker < 0 || m.Worker >= len(v.Workers) || m.To < 0 || m.To >= len(v.Contexts) || moved[m.Worker] {
			reject(m, "invalid worker or context index, or worker moved twice")
			continue
		}
		from := v.Workers[m.Worker].Context
		if from == m.To {
			continue
		}
		if from < 0 {
			reject(m, "worker in no registered context")
			continue
		}
		src, dst := &v.Contexts[from], &v.Contexts[m.To]
		keep := keep(src)
		if count[from]-1 < keep {
			reject(m, "the source would go below its minimum (Limits.Min, the largest pending team, or one worker while it has pending tasks)",
				zap.String("from", src.Name), zap.Int("workers", count[from]), zap.Int("keep", keep))
			continue
		}
		if dst.Limits.Max > 0 && count[m.To]+1 > dst.Limits.Max {
			reject(m, "the destination is at its Limits.Max", zap.String("to_context", dst.Name), zap.Int("max", dst.Limits.Max))
			continue
		}
		if err := h.s.MoveWorkersFor("hypervisor "+h.pol.Name(), src.Context, dst.Context, m.Worker); err != nil {
			reject(m, "the scheduler refused it", zap.Error(err))
			continue
		}
		count[from]--
		count[m.To]++
		moved[m.Worker] = true
		r := Resize{At: v.Now, Worker: m.Worker, From: src.Name, To: dst.Name, Policy: h.pol.Name(), Trigger: v.Trigger}
		done = append(done, r)
		h.cfg.log.Info("hypervisor resize", zap.String("policy", r.Policy), zap.Stringer("trigger", r.Trigger),
			zap.Int("worker", r.Worker), zap.String("from", r.From), zap.String("to", r.To), zap.Duration("at", r.At))
		// A new allocation starts a new sampling window for both.
		for _, i := range []int{from, m.To} {
			c := &v.Contexts[i]
			if smp := h.ctxSample[c.Context]; smp != nil {
				smp.at, smp.flops, smp.workers, smp.done = h.now(), c.FlopsDone, count[i], c.Done
			}
		}
	}
	if len(done) > 0 {
		h.lastResize.Store(h.now())
		h.regMu.Lock()
		h.resizes.Append(done...)
		h.regMu.Unlock()
		if h.cfg.onResize != nil {
			for _, r := range done {
				h.cfg.onResize(r)
			}
		}
	}
	return done, rejected
}

// config is the hypervisor's configuration.
type config struct {
	policy      Policy
	policyName  string
	trigger     Trigger
	triggerSet  bool
	maxIdle     time.Duration
	workerIdle  map[int]time.Duration
	window      time.Duration
	minInterval time.Duration
	idleTick    time.Duration
	speedGap    float64
	speedGapSet bool
	onResize    func(Resize)
	onBusy      func(Trigger)                        // test seam (export_test.go)
	onCloseWait func()                               // test seam (export_test.go)
	onClosing   func()                               // test seam (export_test.go)
	onExecuted  func(*scheduler.Task)                // test seam (export_test.go)
	onNextIdle  func(worker int, next time.Duration) // test seam (export_test.go)
	log         *zap.Logger
	getenv      func(string) string
}

func (c *config) maxIdleOf(w int) time.Duration {
	if d, ok := c.workerIdle[w]; ok {
		return d
	}
	return c.maxIdle
}

// An Option configures New. Options take precedence over the
// environment variables named in their documentation.
type Option func(*config)

// WithPolicy sets the policy (overrides WithPolicyName). A nil p sets
// none: WithPolicyName, PZ_HYPERVISOR_POLICY or the default applies.
func WithPolicy(p Policy) Option { return func(c *config) { c.policy = p } }

// WithPolicyName selects a built-in policy: "app_driven", "idle",
// "gflops_rate", "ispeed", "throughput", "feft" or "teft". Environment:
// PZ_HYPERVISOR_POLICY.
func WithPolicyName(name string) Option { return func(c *config) { c.policyName = name } }

// WithTrigger sets what triggers resizes (default: the policy's
// DefaultTrigger): TriggerIdle, TriggerSpeed, both, or 0 for none (a
// policy's hooks trigger whatever it says). New refuses other values,
// TriggerHook included. Environment: PZ_HYPERVISOR_TRIGGER (idle, speed,
// idle,speed, none).
func WithTrigger(t Trigger) Option { return func(c *config) { c.trigger, c.triggerSet = t, true } }

// WithMaxIdle sets how long a worker may stay idle before the idle
// trigger fires (default 2 ms; 0: the default, or the environment's;
// negative: refused). Environment: PZ_HYPERVISOR_MAX_IDLE (a positive Go
// duration, "500us").
func WithMaxIdle(d time.Duration) Option { return func(c *config) { c.maxIdle = d } }

// WithWorkerMaxIdle sets worker id's own idle threshold; New refuses an
// id that is not one of the scheduler's workers, and a d not positive.
func WithWorkerMaxIdle(id int, d time.Duration) Option {
	return func(c *config) {
		if c.workerIdle == nil {
			c.workerIdle = map[int]time.Duration{}
		}
		c.workerIdle[id] = d
	}
}

// WithWindow sets the sampling window (the frame over which instant
// speeds are measured, and the period of the speed trigger; default
// 20 ms; 0: the default, or the environment's; negative: refused).
// Environment: PZ_HYPERVISOR_WINDOW (a positive Go duration).
func WithWindow(d time.Duration) Option { return func(c *config) { c.window = d } }

// WithMinInterval sets the least time between two triggered resizes
// (0: the window, the default; negative: refused).
func WithMinInterval(d time.Duration) Option { return func(c *config) { c.minInterval = d } }

// WithSpeedGap sets the relative gap between speeds (or predicted end
// times, for gflops_rate; measured and planned speeds, for feft and
// teft) below which the speed policies do not move workers (default
// 0.2). Environment: PZ_HYPERVISOR_SPEED_GAP.
//
// g must be at least 0 (not NaN).
func WithSpeedGap(g float64) Option { return func(c *config) { c.speedGap, c.speedGapSet = g, true } }

// WithIdleTick sets the idle tick (0: half the max idle time, at least
// 100µs, the default; negative: refused): the least time between two
// decisions of the idle trigger, and how often sleeping workers report
// idle cycles to a policy with Hooks that is not a
// scheduler.IdlePacer. Otherwise sleeping workers wake only when there
// may be something to decide (see NextIdleCycle): an idle program with
// its hypervisor open costs no CPU once its decisions backed off.
func WithIdleTick(d time.Duration) Option { return func(c *config) { c.idleTick = d } }

// WithOnResize calls f for every move the hypervisor makes, after it is
// posted to the scheduler (the worker applies it at its next safe
// point), on the goroutine that made the decision, one decision at a
// time. f may read the hypervisor (Counters, Worker, Resizes) and
// register contexts, but must not call ResizeNow, which would wait for
// the decision that calls f, nor Close. It lets a program, or a test,
// wait for resizes as events.
func WithOnResize(f func(Resize)) Option { return func(c *config) { c.onResize = f } }

// WithLogger logs every resize and refused move (Info) and, at Debug
// level, why feft and teft move: each linear program that leads to a
// move ("hypervisor: linear program": the predicted end end_s, the
// fractional share, the rounded target and the current distribution).
func WithLogger(l *zap.Logger) Option { return func(c *config) { c.log = l } }

// WithGetenv replaces os.Getenv for the PZ_HYPERVISOR_* variables.
func WithGetenv(getenv func(string) string) Option { return func(c *config) { c.getenv = getenv } }

func buildConfig(opts []Option, nworkers int) (config, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	env := c.getenv
	if env == nil {
		env = os.Getenv
	}
	if c.log == nil {
		c.log = zap.NewNop()
	}
	dur := func(option, name string, dst *time.Duration, def time.Duration) error {
		if *dst != 0 {
			if *dst < 0 {
				return fmt.Errorf("%w: %s(%v): negative", ErrBadOption, option, *dst)
			}
			return nil
		}
		if v := env(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fmt.Errorf("%w: %s=%q is not a positive duration (like 2ms)", ErrBadOption, name, v)
			}
			*dst = d
			return nil
		}
		*dst = def
		return nil
	}
	if err := dur("WithMaxIdle", "PZ_HYPERVISOR_MAX_IDLE", &c.maxIdle, 2*time.Millisecond); err != nil {
		return c, err
	}
	if err := dur("WithWindow", "PZ_HYPERVISOR_WINDOW", &c.window, 20*time.Millisecond); err != nil {
		return c, err
	}
	for w, d := range c.workerIdle {
		if w < 0 || w >= nworkers {
			return c, fmt.Errorf("%w: WithWorkerMaxIdle(%d, %v): no worker %d (the scheduler has %d)", ErrBadOption, w, d, w, nworkers)
		}
		if d <= 0 {
			return c, fmt.Errorf("%w: WithWorkerMaxIdle(%d, %v): the idle time must be positive", ErrBadOption, w, d)
		}
	}
	switch {
	case c.minInterval < 0:
		return c, fmt.Errorf("%w: WithMinInterval(%v): negative", ErrBadOption, c.minInterval)
	case c.idleTick < 0:
		return c, fmt.Errorf("%w: WithIdleTick(%v): negative", ErrBadOption, c.idleTick)
	case c.speedGapSet && !(c.speedGap >= 0):
		return c, fmt.Errorf("%w: WithSpeedGap(%g): want a number at least 0", ErrBadOption, c.speedGap)
	}
	if c.minInterval == 0 {
		c.minInterval = c.window
	}
	if c.idleTick == 0 {
		c.idleTick = max(c.maxIdle/2, 100*time.Microsecond)
	}
	if !c.speedGapSet {
		c.speedGap = 0.2
		if v := env("PZ_HYPERVISOR_SPEED_GAP"); v != "" {
			var g float64
			if _, err := fmt.Sscan(v, &g); err != nil || !(g >= 0) {
				return c, fmt.Errorf("%w: PZ_HYPERVISOR_SPEED_GAP=%q is not a non-negative number", ErrBadOption, v)
			}
			c.speedGap = g
		}
	}
	if c.policy == nil {
		name := c.policyName
		if name == "" {
			name = env("PZ_HYPERVISOR_POLICY")
		}
		if name == "" {
			name = "idle"
		}
		p, err := PolicyByName(name, c.speedGap)
		if err != nil {
			return c, err
		}
		c.policy = p
	}
	if !c.triggerSet {
		if v := env("PZ_HYPERVISOR_TRIGGER"); v != "" {
			t, err := ParseTrigger(v)
			if err != nil {
				return c, fmt.Errorf("PZ_HYPERVISOR_TRIGGER: %w", err)
			}
			c.trigger = t
		} else {
			c.trigger = DefaultTrigger(c.policy)
		}
	} else if extra := c.trigger &^ (TriggerIdle | TriggerSpeed); extra != 0 {
		// Hooks always trigger; other bits mean nothing. Either would
		// otherwise be taken silently for "none".
		return c, fmt.Errorf("%w: WithTrigger(%d): want TriggerIdle, TriggerSpeed, both or 0 (none); %s",
			ErrBadOption, c.trigger, triggerBitsMeaning(extra))
	}
	return c, nil
}

// triggerBitsMeaning says why a WithTrigger bit is refused.
func triggerBitsMeaning(extra Trigger) string {
	if extra == TriggerHook {
		return "TriggerHook is not configured: a policy's hooks always trigger"
	}
	return fmt.Sprintf("bits %#x are no trigger", uint8(extra))
}
