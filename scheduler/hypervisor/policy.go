package hypervisor

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/pzgo/pz/scheduler"
)

// A View is what a policy decides from: the registered contexts and
// every worker, at one instant. Policies must not keep it.
type View struct {
	// Now is the time since the hypervisor started.
	Now time.Duration
	// Trigger is what caused this decision.
	Trigger Trigger
	// Contexts are the registered, live contexts.
	Contexts []ContextView
	// Workers are all the scheduler's workers, by id.
	Workers []WorkerView
	// Types are the types of task of the registered contexts with their
	// remaining counts and times, for policies that implement
	// TaskTyped (teft); nil otherwise.
	Types []TaskTypeView
	// Logger is the hypervisor's logger (WithLogger), for policies that
	// explain a decision.
	Logger *zap.Logger
}

// ContextView is one registered context in a View.
type ContextView struct {
	Context *scheduler.Context
	Name    string
	// Workers are the context's workers (ids, sorted).
	Workers []int
	Limits  Limits
	// Pending counts the tasks submitted and not completed; Ready those
	// queued and not yet taken by a worker; Done those completed.
	Pending, Ready, Done int64
	// MinWorkers is what the pending tasks need (Context.MinWorkers): the
	// largest team among them, 1 for plain tasks, 0 for none. The
	// hypervisor never leaves the context fewer workers.
	MinWorkers int
	// FlopsDone is the sum of the completed tasks' flops.
	FlopsDone float64
	// Speed is the instant speed (flop/s) over the last complete
	// sampling window, WorkerSpeed the same per worker; 0 before the
	// first window.
	Speed, WorkerSpeed float64
	// TaskSpeed is the tasks completed per second over the last complete
	// sampling window (0 before the first): the speed of a context whose
	// codelets declare no Flops.
	TaskSpeed float64
	// BusySpeed is the flops done per second of worker time spent on the
	// context's tasks, since the start: the speed of one busy worker,
	// whatever the parallelism (0 before the first task with flops).
	BusySpeed float64
	// KindSpeed is BusySpeed by kind of worker (indexed by
	// scheduler.WorkerKind; 0 where no worker of that kind has run a
	// task of the context yet).
	KindSpeed []float64
}

// Remaining returns the declared flops not done yet (0 if none are
// declared).
func (c *ContextView) Remaining() float64 { return max(c.Limits.TotalFlops-c.FlopsDone, 0) }

// WorkerView is one worker in a View.
type WorkerView struct {
	ID int
	// Kind is what the worker runs (CPU, CUDA).
	Kind scheduler.WorkerKind
	// Context is the index in View.Contexts of the worker's context, -1
	// if it is in no registered context.
	Context int
	// Idle is how long the worker has been idle (0 when busy); MaxIdle
	// its threshold.
	Idle, MaxIdle time.Duration
	// Speed is its instant speed (flop/s) over the last window.
	Speed float64
}

// A Move asks for worker Worker to go to View.Contexts[To].
type Move struct {
	Worker int
	To     int
}

// A Policy decides how to resize the registered contexts. Resize is
// called with a fresh View each time a trigger fires, one call at a
// time, on a worker goroutine; it returns the moves to make (the
// hypervisor drops those that would break a context's Limits, or leave
// a context with pending tasks without workers). A policy that also
// implements Hooks sees every event first.
//
// New finds Hooks, Feedback and TaskTyped by type assertions on the
// policy it is given, once: a policy that wraps another (to log its
// decisions, say) must implement those the wrapped one does and forward
// them. Wrapped without them, AppDriven never learns that its tagged
// tasks completed, and TEFT gets no View.Types and moves no worker.
//
// When Resize is called: at once for a hook that returned true and
// for ResizeNow; for the idle trigger, at most every idle tick while a
// worker is idle past its threshold; for the speed trigger, once a
// window. While decisions of the idle and speed triggers move nothing
// and nothing happens - no task submitted, taken or completed, no
// worker starting or ending an idle period or reaching its threshold,
// no Register, Unregister, SetTotalFlops, AddTotalFlops or
// AnnounceTasks, no move - the hypervisor calls Resize for them less
// and less often: the least time between two calls doubles from two
// idle ticks up to 100 ms, and there the idle workers stop asking and
// sleep until such an event (or a decision of a hook or ResizeNow),
// which brings it back to the idle tick at once. A change the
// hypervisor sees only in a View (the program's own MoveWorkers, a
// context's StopSubmission or deletion) is seen at the next call. A
// policy may depend on time passing alone (View.Now, a worker's Idle
// growing, speeds over windows) only while something happens: once the
// program is idle and the backoff at its bound, it is not asked until
// the next event; to act at a precise moment, ask from a hook
// (IdleCycle is still called every idle tick for a policy with Hooks,
// unless it implements scheduler.IdlePacer to say when it needs the
// next call) or call ResizeNow.
type Policy interface {
	Name() string
	Resize(v *View) []Move
}

// Hooks are the events a custom policy may observe: the scheduler's
// Monitor hooks, after the hypervisor's counters are updated. They run
// on the scheduler's goroutines (see scheduler.Monitor), concurrently;
// returning true asks for a resize now (TriggerHook).
type Hooks interface {
	TaskPushed(c *scheduler.Context, t *scheduler.Task) bool
	TaskPopped(c *scheduler.Context, t *scheduler.Task, worker int) bool
	IdleCycle(c *scheduler.Context, worker int, idle time.Duration) bool
	IdleEnd(c *scheduler.Context, worker int, idle time.Duration) bool
	TaskExecuted(c *scheduler.Context, t *scheduler.Task, worker int, elapsed time.Duration) bool
}

// Feedback is implemented by a policy that wants to know which of its
// moves the hypervisor refused (because of Limits, a context with
// pending tasks and one worker, or the scheduler). Rejected is called
// after each Resize, with the same View, one call at a time; rejected
// is empty when every move was made.
type Feedback interface {
	Rejected(v *View, rejected []Move)
}

// NopHooks implements Hooks doing nothing; embed it to implement some.
type NopHooks struct{}

// TaskPushed returns false.
func (NopHooks) TaskPushed(*scheduler.Context, *scheduler.Task) bool { return false }

// TaskPopped returns false.
func (NopHooks) TaskPopped(*scheduler.Context, *scheduler.Task, int) bool { return false }

// IdleCycle returns false.
func (NopHooks) IdleCycle(*scheduler.Context, int, time.Duration) bool { return false }

// IdleEnd returns false.
func (NopHooks) IdleEnd(*scheduler.Context, int, time.Duration) bool { return false }

// TaskExecuted returns false.
func (NopHooks) TaskExecuted(*scheduler.Context, *scheduler.Task, int, time.Duration) bool {
	return false
}

var _ Hooks = NopHooks{}

// Policies returns the names of the built-in policies.
func Policies() []string {
	return []string{"app_driven", "feft", "gflops_rate", "idle", "ispeed", "teft", "throughput"}
}

// PolicyByName returns a new built-in policy; gap is the speed gap of
// the speed-based ones (see WithSpeedGap). It returns ErrBadOption for
// an unknown name, and for a gap negative or NaN.
func PolicyByName(name string, gap float64) (Policy, error) {
	if !(gap >= 0) {
		return nil, fmt.Errorf("%w: PolicyByName(%q, %g): the speed gap must be a number at least 0 (0.2 is WithSpeedGap's default)", ErrBadOption, name, gap)
	}
	switch name {
	case "app_driven":
		return NewAppDriven(), nil
	case "idle":
		return Idle{}, nil
	case "gflops_rate":
		return GflopsRate{Gap: gap}, nil
	case "ispeed":
		return &ISpeed{Gap: gap}, nil
	case "throughput":
		return Throughput{Gap: gap}, nil
	case "feft":
		return FEFT{Gap: gap}, nil
	case "teft":
		return TEFT{Gap: gap}, nil
	}
	return nil, fmt.Errorf("%w: unknown policy %q; valid policies are %v (WithPolicyName or PZ_HYPERVISOR_POLICY)", ErrBadOption, name, Policies())
}

// DefaultTrigger returns the triggers a built-in policy works with:
// idle for idle, speed for ispeed and throughput, both for gflops_rate,
// feft and teft (so that a finished context's idle workers move at
// once), none for app_driven (its hook triggers) and for custom
// policies.
func DefaultTrigger(p Policy) Trigger {
	switch p.(type) {
	case Idle, *Idle:
		return TriggerIdle
	case GflopsRate, *GflopsRate, FEFT, *FEFT, TEFT, *TEFT:
		return TriggerIdle | TriggerSpeed
	case *ISpeed, Throughput, *Throughput:
		return TriggerSpeed
	}
	return 0
}

// members returns the worker ids of context i, idle ones first (longest
// idle first), then by decreasing id: the ones to give away first.
func members(v *View, i int) []int {
	ws := slices.Clone(v.Contexts[i].Workers)
	sort.SliceStable(ws, func(a, b int) bool {
		ia, ib := v.Workers[ws[a]].Idle, v.Workers[ws[b]].Idle
		if ia != ib {
			return ia > ib
		}
		return ws[a] > ws[b]
	})
	return ws
}

// keep is the least number of workers context i keeps.
func keep(c *ContextView) int {
	n := max(c.Limits.Min, c.MinWorkers)
	if c.Pending > 0 {
		n = max(n, 1)
	}
	return n
}

// room reports whether context i may receive one more worker given n.
func room(c *ContextView, n int) bool { return c.Limits.Max == 0 || n < c.Limits.Max }

// Idle is the idle policy: a worker idle for longer than its threshold
// moves to the registered context that needs workers most - the one
// with the most ready tasks per worker - if one has ready tasks.
type Idle struct{}

// Name returns "idle".
func (Idle) Name() string { return "idle" }

// Resize implements Policy.
func (Idle) Resize(v *View) []Move {
	n := make([]int, len(v.Contexts))
	for i := range v.Contexts {
		n[i] = len(v.Contexts[i].Workers)
	}
	ready := make([]float64, len(v.Contexts))
	for i, c := range v.Contexts {
		ready[i] = float64(c.Ready)
	}
	var moves []Move
	for _, w := range v.Workers {
		if w.Context < 0 || w.Idle < w.MaxIdle || n[w.Context] <= keep(&v.Contexts[w.Context]) {
			continue
		}
		best, need := -1, 0.0
		for i := range v.Contexts {
			if i == w.Context || ready[i] <= 0 || !room(&v.Contexts[i], n[i]) {
				continue
			}
			if x := ready[i] / float64(n[i]+1); x > need {
				best, need = i, x
			}
		}
		if best < 0 {
			continue
		}
		moves = append(moves, Move{Worker: w.ID, To: best})
		n[w.Context]--
		n[best]++
		ready[best]-- // the newcomer takes one of them
	}
	return moves
}

// GflopsRate is the gflops_rate policy: contexts should finish together.
// From each context's declared total flops (Limits.TotalFlops), the flops
// of its completed tasks and its speed per busy worker, it shares
// the workers in proportion to the remaining work (in worker-seconds),
// every context with work keeping at least one worker; it moves workers
// when the predicted end times differ by more than Gap (relative), or a
// context without remaining work holds workers. A context is active
// (keeps at least one worker) until its declared flops are done, even
// while it has no task pending, unless there are fewer workers than
// active contexts: then one with no task pending gives its workers to
// those whose tasks wait. Contexts that declared no total keep their
// workers.
type GflopsRate struct {
	// Gap is the relative difference of predicted end times that
	// justifies a move.
	Gap float64
}

// Name returns "gflops_rate".
func (GflopsRate) Name() string { return "gflops_rate" }

// Resize implements Policy.
func (p GflopsRate) Resize(v *View) []Move {
	var managed []int
	total := 0
	var known, sum float64
	for i := range v.Contexts {
		c := &v.Contexts[i]
		if c.Limits.TotalFlops <= 0 {
			continue
		}
		managed = append(managed, i)
		total += len(c.Workers)
		if c.BusySpeed > 0 {
			known++
			sum += c.BusySpeed
		}
	}
	if len(managed) < 2 || total == 0 {
		return nil
	}
	speed := func(c *ContextView) float64 {
		if c.BusySpeed > 0 {
			return c.BusySpeed
		}
		if known > 0 {
			return sum / known
		}
		return 1 // no measurement yet: equal speeds
	}
	need := make([]float64, len(v.Contexts))
	lo := make([]int, len(v.Contexts))
	hi := make([]int, len(v.Contexts))
	idleHolder := false
	minEnd, maxEnd := math.Inf(1), 0.0
	nactive := 0
	for _, i := range managed {
		c := &v.Contexts[i]
		// A context is active until its declared work is done, even
		// between two submissions (floating-point sums of the tasks'
		// flops may miss the declared total by rounding), unless it
		// has stopped taking tasks and has none left.
		active := c.Remaining() > 1e-9*c.Limits.TotalFlops && !(c.Pending == 0 && c.Context.Stopped())
		if active {
			nactive++
			need[i] = c.Remaining() / speed(c)
			if n := len(c.Workers); n > 0 {
				end := need[i] / float64(n)
				minEnd, maxEnd = min(minEnd, end), max(maxEnd, end)
			} else {
				maxEnd = math.Inf(1)
			}
		} else if len(c.Workers) > keep(c) {
			idleHolder = true
		}
		lo[i] = keep(c)
		if active {
			lo[i] = max(lo[i], 1)
		}
		hi[i] = total
		if c.Limits.Max > 0 {
			hi[i] = min(c.Limits.Max, total)
		}
	}
	if nactive == 0 {
		return nil
	}
	// With fewer workers than active contexts, one with no task pending
	// (between two phases) cannot claim one from a context whose tasks
	// wait without a worker: it would hold it idle while they never run.
	if sumOf(managed, lo) > total {
		for _, i := range managed {
			c := &v.Contexts[i]
			if c.Pending == 0 && lo[i] > keep(c) {
				lo[i] = keep(c)
				if len(c.Workers) > lo[i] {
					idleHolder = true
				}
			}
		}
	}
	gapOK := maxEnd > 0 && !math.IsInf(minEnd, 1) && (maxEnd-minEnd)/maxEnd > p.Gap
	if !idleHolder && !gapOK && !math.IsInf(maxEnd, 1) {
		return nil
	}
	target := apportion(total, managed, need, lo, hi)
	return movesToward(v, managed, target)
}

// sumOf returns the sum of x over the indices in idx.
func sumOf(idx []int, x []int) int {
	n := 0
	for _, i := range idx {
		n += x[i]
	}
	return n
}

// apportion shares total workers among the indices in idx in proportion
// to weight, each between lo and hi (largest remainder method).
func apportion(total int, idx []int, weight []float64, lo, hi []int) map[int]int {
	t := map[int]int{}
	left := total
	for _, i := range idx {
		t[i] = lo[i]
		left -= lo[i]
	}
	for left > 0 {
		// Give the next worker to the context furthest below its share.
		var sw float64
		for _, i := range idx {
			sw += weight[i]
		}
		best, bestDef := -1, math.Inf(-1)
		for _, i := range idx {
			if t[i] >= hi[i] {
				continue
			}
			share := 0.0
			if sw > 0 {
				share = float64(total) * weight[i] / sw
			}
			if d := share - float64(t[i]); d > bestDef {
				best, bestDef = i, d
			}
		}
		if best < 0 {
			break
		}
		t[best]++
		left--
	}
	return t
}

// movesToward returns moves from contexts above their target to those
// below it.
func movesToward(v *View, idx []int, target map[int]int) []Move {
	var donors []int // worker ids to give away
	var recv []int   // context indices, one per worker wanted
	for _, i := range idx {
		n := len(v.Contexts[i].Workers)
		if d := n - target[i]; d > 0 {
			donors = append(donors, members(v, i)[:d]...)
		}
		for k := n; k < target[i]; k++ {
			recv = append(recv, i)
		}
	}
	var moves []Move
	for k := 0; k < min(len(donors), len(recv)); k++ {
		moves = append(moves, Move{Worker: donors[k], To: recv[k]})
	}
	return moves
}

// ISpeed is the ispeed policy: per sampling window (a frame of work),
// it equalizes the contexts' instant speeds, moving one worker from the
// fastest context with work to the slowest when their speeds differ by
// more than Gap (relative to the fastest) in two consecutive decisions
// (one noisy window does not move a worker). A context with pending
// work and no worker counts as the slowest.
//
// A context with no pending work (finished, or between two phases of
// submissions) is the first source: at any decision, whatever its
// trigger, it gives every worker above its Limits.Min to the contexts
// with pending work, each to the one with the lowest instant speed
// counting the workers it has been given (a worker adds the context's
// speed per worker). Should it get work again, it has no worker and so
// counts as the slowest: it gets one back at the next decision. Keep
// workers in such a context with Limits.Min.
type ISpeed struct {
	Gap float64

	// The pair seen at the previous decision (Resize calls are
	// serialized by the hypervisor).
	lastFast, lastSlow *scheduler.Context
}

// Name returns "ispeed".
func (*ISpeed) Name() string { return "ispeed" }

// Resize implements Policy.
func (p *ISpeed) Resize(v *View) []Move {
	if moves := giveIdle(v); len(moves) > 0 {
		p.lastFast, p.lastSlow = nil, nil // new allocations, new windows
		return moves
	}
	fast, slow := -1, -1
	for i := range v.Contexts {
		c := &v.Contexts[i]
		if c.Pending == 0 {
			continue
		}
		if len(c.Workers) > keep(c) && c.Speed > 0 && (fast < 0 || c.Speed > v.Contexts[fast].Speed) {
			fast = i
		}
		if room(c, len(c.Workers)) && (slow < 0 || c.Speed < v.Contexts[slow].Speed) {
			slow = i
		}
	}
	if fast < 0 || slow < 0 || fast == slow {
		return nil
	}
	f, s := v.Contexts[fast].Speed, v.Contexts[slow].Speed
	if (f-s)/f <= p.Gap && len(v.Contexts[slow].Workers) > 0 {
		p.lastFast, p.lastSlow = nil, nil
		return nil
	}
	fc, sc := v.Contexts[fast].Context, v.Contexts[slow].Context
	if len(v.Contexts[slow].Workers) > 0 && (p.lastFast != fc || p.lastSlow != sc) {
		p.lastFast, p.lastSlow = fc, sc // confirm at the next decision
		return nil
	}
	p.lastFast, p.lastSlow = nil, nil
	return []Move{{Worker: members(v, fast)[0], To: slow}}
}

// giveIdle returns ISpeed's moves of the workers of the contexts with
// no pending work, beyond what they keep, to the contexts with pending
// work and room: each to the one whose speed, counting the workers
// already given it, is lowest (ties: the first registered).
func giveIdle(v *View) []Move {
	var donors, recv []int
	for i := range v.Contexts {
		c := &v.Contexts[i]
		switch {
		case c.Pending == 0 && len(c.Workers) > keep(c):
			donors = append(donors, i)
		case c.Pending > 0:
			recv = append(recv, i)
		}
	}
	if len(donors) == 0 || len(recv) == 0 {
		return nil
	}
	n := make([]int, len(v.Contexts))
	est := make([]float64, len(v.Contexts))
	for _, i := range recv {
		n[i] = len(v.Contexts[i].Workers)
		est[i] = v.Contexts[i].Speed
	}
	// perWorker is what one more worker adds to context i's speed: its
	// speed per worker, or, before it was measured, an arbitrary unit
	// (so that newcomers spread over the unmeasured contexts).
	perWorker := func(i int) float64 {
		c := &v.Contexts[i]
		switch {
		case c.WorkerSpeed > 0:
			return c.WorkerSpeed
		case c.Speed > 0 && len(c.Workers) > 0:
			return c.Speed / float64(len(c.Workers))
		}
		return 1
	}
	var moves []Move
	for _, d := range donors {
		c := &v.Contexts[d]
		for _, w := range members(v, d)[:len(c.Workers)-keep(c)] {
			best := -1
			for _, i := range recv {
				if room(&v.Contexts[i], n[i]) && (best < 0 || est[i] < est[best]) {
					best = i
				}
			}
			if best < 0 {
				return moves
			}
			moves = append(moves, Move{Worker: w, To: best})
			n[best]++
			est[best] += perWorker(best)
		}
	}
	return moves
}

// Throughput is the throughput policy: it maximizes the total instant
// speed, moving one worker at a time from the context where a worker
// adds least (the lowest speed per worker, or no pending work) to the
// one where it adds most (the highest speed per worker among those with
// more ready tasks waiting than workers), when the latter beats the
// former by more than Gap. A context with pending tasks and no worker
// (emptied while it had none, between two phases) is the receiver first,
// whatever the speeds: without a worker it would never run them.
type Throughput struct {
	Gap float64
}

// Name returns "throughput".
func (Throughput) Name() string { return "throughput" }

// Resize implements Policy.
func (p Throughput) Resize(v *View) []Move {
	donor, recv := -1, -1
	per := func(c *ContextView) float64 {
		if c.Pending == 0 || len(c.Workers) == 0 {
			return 0
		}
		return c.Speed / float64(len(c.Workers))
	}
	starved := func(c *ContextView) bool { return c.Pending > 0 && len(c.Workers) == 0 }
	for i := range v.Contexts {
		c := &v.Contexts[i]
		if len(c.Workers) > keep(c) && (donor < 0 || per(c) < per(&v.Contexts[donor])) {
			donor = i
		}
		// A receiver has a backlog (more queued tasks than workers), so
		// that one more worker would find work; a context without a
		// worker comes first.
		if c.Pending > 0 && (c.Ready > int64(len(c.Workers)) || starved(c)) && room(c, len(c.Workers)) &&
			(recv < 0 || starved(c) && !starved(&v.Contexts[recv]) || starved(c) == starved(&v.Contexts[recv]) && per(c) > per(&v.Contexts[recv])) {
			recv = i
		}
	}
	if donor < 0 || recv < 0 || donor == recv {
		return nil
	}
	pd, pr := per(&v.Contexts[donor]), per(&v.Contexts[recv])
	if !starved(&v.Contexts[recv]) && pr <= pd*(1+p.Gap) {
		return nil
	}
	return []Move{{Worker: members(v, donor)[0], To: recv}}
}

// AppDriven is the app_driven policy: the application asks for resizes
// that happen when a task with a given tag completes (StarPU's
// sc_hypervisor_post_resize_request). A request is never dropped while
// it can still be honoured: moves the hypervisor refuses (a source at
// its Limits.Min, or with pending tasks and one worker) stay due until
// they are made, logged (Info) once per request. A refused request is
// not retried at every idle cycle: it waits, Due() still counting it,
// until something that could change the answer happens - a task
// submitted to or completed in its source or destination, a Register
// or Unregister (a Limits change) - and, for the changes no hook sees
// (the program's own MoveWorkers, a context deleted), at the latest
// maxWait (100 ms, the idle backoff's bound) after its last try. A
// decision in which a move was made retries the waiting requests at
// the next event, as before. A request whose context is no longer
// registered is dropped and logged. A request moves at most the
// workers its source has, and at most those its destination's
// Limits.Max leaves room for, when it is tried: the rest is dropped and
// logged (Info), once, so that a request beyond Max does not stay due
// for ever (raise Max before the tagged task completes to move them
// all).
type AppDriven struct {
	NopHooks
	mu       sync.Mutex
	rules    map[scheduler.Tag]tagRule
	due      []tagRule
	inflight []proposal // the last Resize's moves, by request
	nflight  int        // len(inflight), guarded by mu
	// ndue is len(due)+nflight, stored under mu whenever either changes,
	// so that a request is counted from the moment it falls due until
	// Rejected settles it, never 0 in between.
	ndue    atomic.Int64
	lastTry atomic.Int64 // unix ns of the last retry asked for
	// waiting holds the contexts (sources and destinations) of the
	// requests tried by the decision under way (armed) or refused by
	// the last one, which moved nothing: an event concerning one of them
	// (wakeFor, limitsChanged) clears it. While it is set and not armed,
	// the hooks retry only every maxWait; nil: every retryEvery. A
	// decision puts a request to wait only if it stayed armed
	// throughout, so that an event during the decision is not lost.
	waiting atomic.Pointer[waitSet]
}

// waitSet is AppDriven.waiting.
type waitSet struct {
	ctxs  []*scheduler.Context
	armed bool
}

type tagRule struct {
	tag      scheduler.Tag
	from, to *scheduler.Context
	n        int
	logged   bool // its wait was logged
}

type proposal struct {
	rule  tagRule
	moves []Move
}

// retryEvery is the least time between two retries of a due request
// asked for by the hooks: often enough to follow the workers' safe
// points, rarely enough to stay off the path of every task.
const retryEvery = time.Millisecond

// maxWait is the least time between two retries of requests refused
// while nothing that could change the answer happened: it catches the
// changes no hook reports (the program's own MoveWorkers, a deletion).
const maxWait = maxQuiet

// NewAppDriven returns an app_driven policy without requests.
func NewAppDriven() *AppDriven { return &AppDriven{rules: map[scheduler.Tag]tagRule{}} }

// Name returns "app_driven".
func (*AppDriven) Name() string { return "app_driven" }

// OnTag asks to move n workers from one context to another when the
// task tagged tag completes (once); a later OnTag of the same tag
// replaces the request. Both contexts must be registered when the task
// completes: a request whose context is not (or was deleted) is dropped
// then and logged. OnTag refuses, recording nothing, tag 0 (which
// tags no task) and an n below 1 (ErrBadOption), and a nil context,
// from equal to to, and contexts of two schedulers (ErrBadContext).
func (p *AppDriven) OnTag(tag scheduler.Tag, from, to *scheduler.Context, n int) error {
	switch {
	case tag == 0:
		return fmt.Errorf("%w: OnTag(0, %v, %v, %d): tag 0 means no tag, no task completes with it; tag a task (scheduler.WithTag) with another", ErrBadOption, from, to, n)
	case n < 1:
		return fmt.Errorf("%w: OnTag(%d, %v, %v, %d): the number of workers to move must be at least 1", ErrBadOption, tag, from, to, n)
	case from == nil || to == nil:
		return fmt.Errorf("%w: OnTag(%d, %v, %v, %d): give both contexts", ErrBadContext, tag, from, to, n)
	case from == to:
		return fmt.Errorf("%w: OnTag(%d, %v, %v, %d): the workers would move to the context they are in", ErrBadContext, tag, from, to, n)
	case from.Scheduler() != to.Scheduler():
		return fmt.Errorf("%w: OnTag(%d, %v, %v, %d): the contexts belong to two schedulers", ErrBadContext, tag, from, to, n)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules[tag] = tagRule{tag: tag, from: from, to: to, n: n}
	return nil
}

// Due returns the number of requests that fell due and whose moves are
// not all made yet: those waiting, and those a Resize proposed until
// Rejected reports on them (the hypervisor calls it right after the
// moves are applied). A request waiting for its moves is counted all
// along, never 0 in between.
func (p *AppDriven) Due() int { return int(p.ndue.Load()) }

// TaskPushed implements Hooks: a task submitted to the source or
// destination of a refused request lets it be retried.
func (p *AppDriven) TaskPushed(c *scheduler.Context, _ *scheduler.Task) bool {
	p.wakeFor(c)
	return p.retry()
}

// TaskExecuted implements Hooks: a tagged task with a request makes it
// due. While requests wait, it asks for a retry (at most every
// millisecond; for refused requests, see AppDriven).
func (p *AppDriven) TaskExecuted(c *scheduler.Context, t *scheduler.Task, worker int, elapsed time.Duration) bool {
	p.wakeFor(c)
	if t.Tag != 0 {
		p.mu.Lock()
		r, ok := p.rules[t.Tag]
		if ok {
			delete(p.rules, t.Tag)
			p.due = append(p.due, r)
			p.ndue.Store(int64(len(p.due) + p.nflight))
		}
		p.mu.Unlock()
		if ok {
			return true
		}
	}
	return p.retry()
}

// IdleCycle implements Hooks: while requests wait, an idle worker asks
// for a retry (at most every millisecond).
func (p *AppDriven) IdleCycle(*scheduler.Context, int, time.Duration) bool { return p.retry() }

// NextIdleCycle implements scheduler.IdlePacer for its IdleCycle hook:
// with no request due, idle workers need not report (0: they sleep
// until an event); while requests wait, they report when the next retry
// is allowed (every millisecond, or every maxWait for refused ones).
func (p *AppDriven) NextIdleCycle(*scheduler.Context, int, time.Duration) time.Duration {
	if p.ndue.Load() == 0 {
		return 0
	}
	every := retryEvery
	if w := p.waiting.Load(); w != nil && !w.armed {
		every = maxWait
	}
	since := time.Duration(time.Now().UnixNano() - p.lastTry.Load())
	return max(every-since, retryEvery)
}

func (p *AppDriven) retry() bool {
	if p.ndue.Load() == 0 {
		return false
	}
	every := int64(retryEvery)
	if w := p.waiting.Load(); w != nil && !w.armed {
		every = int64(maxWait)
	}
	now, last := time.Now().UnixNano(), p.lastTry.Load()
	return now-last >= every && p.lastTry.CompareAndSwap(last, now)
}

// wakeFor ends the wait of refused requests when c is one of their
// contexts: an event there may change the answer. One atomic load when
// no request waits.
func (p *AppDriven) wakeFor(c *scheduler.Context) {
	if w := p.waiting.Load(); w != nil && slices.Contains(w.ctxs, c) {
		p.waiting.CompareAndSwap(w, nil)
	}
}

// limitsChanged ends the wait of refused requests: the hypervisor calls
// it on Register and Unregister (the limits, or the contexts, changed).
func (p *AppDriven) limitsChanged() { p.waiting.Store(nil) }

// Resize implements Policy: the due requests.
func (p *AppDriven) Resize(v *View) []Move {
	p.mu.Lock()
	due := p.due
	p.due = nil
	// The requests taken stay counted (as in flight) until Rejected;
	// those of a Resize that Rejected never settled are forgotten.
	p.nflight += len(due) - len(p.inflight)
	p.mu.Unlock()
	armed := &waitSet{armed: true}
	for _, r := range due {
		armed.ctxs = append(armed.ctxs, r.from, r.to)
	}
	p.waiting.Store(armed)
	p.inflight = p.inflight[:0]
	defer func() {
		p.mu.Lock()
		p.nflight -= len(due) - len(p.inflight) // the dropped ones
		p.ndue.Store(int64(len(p.due) + p.nflight))
		p.mu.Unlock()
	}()
	used := map[int]bool{}
	into := map[int]int{} // workers planned into each context
	var moves []Move
	for _, r := range due {
		from := slices.IndexFunc(v.Contexts, func(c ContextView) bool { return c.Context == r.from })
		to := slices.IndexFunc(v.Contexts, func(c ContextView) bool { return c.Context == r.to })
		if from < 0 || to < 0 || r.n <= 0 {
			logger(v).Warn("hypervisor app_driven: request dropped: a context is not registered (or deleted), or it moves no worker",
				zap.Uint64("tag", uint64(r.tag)), zap.Stringer("from", r.from), zap.Stringer("to", r.to), zap.Int("n", r.n))
			continue
		}
		if dst := &v.Contexts[to]; dst.Limits.Max > 0 {
			// Clip to what the destination's Max allows: a move beyond
			// it would be refused at every retry, and the request
			// stay due for ever.
			room := max(dst.Limits.Max-len(dst.Workers)-into[to], 0)
			if r.n > room {
				logger(v).Info("hypervisor app_driven: the destination's Limits.Max leaves room for fewer workers than asked; the rest of the request is dropped",
					zap.Uint64("tag", uint64(r.tag)), zap.String("to", dst.Name), zap.Int("max", dst.Limits.Max),
					zap.Int("workers", len(dst.Workers)), zap.Int("asked", r.n), zap.Int("dropped", r.n-room))
				r.n = room
			}
			if r.n == 0 {
				continue
			}
		}
		pr := proposal{rule: r}
		for _, w := range members(v, from) {
			if len(pr.moves) == r.n {
				break
			}
			if !used[w] {
				used[w] = true
				pr.moves = append(pr.moves, Move{Worker: w, To: to})
			}
		}
		if len(pr.moves) < r.n {
			logger(v).Info("hypervisor app_driven: the source has fewer workers than asked; moving those it has",
				zap.Uint64("tag", uint64(r.tag)), zap.String("from", v.Contexts[from].Name), zap.Int("asked", r.n), zap.Int("moving", len(pr.moves)))
		}
		moves = append(moves, pr.moves...)
		into[to] += len(pr.moves)
		p.inflight = append(p.inflight, pr)
	}
	return moves
}

// Rejected implements Feedback: the refused moves of a request stay
// due; when the decision moved nothing, they wait for an event that
// could change the answer (see AppDriven).
func (p *AppDriven) Rejected(v *View, rejected []Move) {
	var again []tagRule
	wait := &waitSet{}
	moved := false
	for _, pr := range p.inflight {
		n := 0
		for _, m := range pr.moves {
			if slices.Contains(rejected, m) {
				n++
			}
		}
		moved = moved || n < len(pr.moves)
		if n > 0 {
			r := pr.rule
			r.n = n
			if !r.logged {
				r.logged = true
				logger(v).Info("hypervisor app_driven: request waits: moves refused now, retried when the source, the destination or the limits change",
					zap.Uint64("tag", uint64(r.tag)), zap.Stringer("from", r.from), zap.Stringer("to", r.to), zap.Int("waiting", n))
			}
			again = append(again, r)
			wait.ctxs = append(wait.ctxs, r.from, r.to)
		}
	}
	// Set before the requests are put back: a hook that sees them due
	// sees the wait too. Only if no event concerning them came since
	// Resize took them (still armed); an event from now on ends it.
	if w := p.waiting.Load(); w != nil && w.armed {
		if len(again) > 0 && !moved {
			p.waiting.CompareAndSwap(w, wait)
		} else {
			p.waiting.CompareAndSwap(w, nil)
		}
	}
	p.mu.Lock()
	p.nflight -= len(p.inflight)
	p.inflight = p.inflight[:0]
	p.due = append(again, p.due...)
	p.ndue.Store(int64(len(p.due) + p.nflight))
	p.mu.Unlock()
}

// logger returns v's logger, or a no-op one.
func logger(v *View) *zap.Logger {
	if v.Logger == nil {
		return zap.NewNop()
	}
	return v.Logger
}

var (
	_ Policy              = Idle{}
	_ Policy              = GflopsRate{}
	_ Policy              = (*ISpeed)(nil)
	_ Policy              = Throughput{}
	_ Policy              = (*AppDriven)(nil)
	_ Hooks               = (*AppDriven)(nil)
	_ scheduler.IdlePacer = (*AppDriven)(nil)
	_ Feedback            = (*AppDriven)(nil)
)
