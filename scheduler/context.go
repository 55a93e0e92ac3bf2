package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Sentinel errors of scheduling contexts; each is wrapped with the names
// of the context and workers involved.
var (
	// ErrBadWorker is returned for a worker id that does not exist, or
	// that is not a member of the context it is removed or moved from.
	ErrBadWorker = errors.New("scheduler: invalid worker")
	// ErrWorkerBusy is returned when a worker given to a context already
	// belongs to another context that is not an ancestor of it (a worker
	// is in at most one context per level of nesting); move it instead.
	ErrWorkerBusy = errors.New("scheduler: worker belongs to another context")
	// ErrBadContext is returned for a context that belongs to another
	// scheduler, an inheritor that cannot inherit (the context itself,
	// one of its sub-contexts, a deleted one), deleting the global context
	// or a context that still has sub-contexts, a new context's name that
	// is empty, GlobalName or in use, MoveWorkers from a context to
	// itself, and similar misuse.
	ErrBadContext = errors.New("scheduler: invalid context")
	// ErrContextDeleted is returned when a deleted context is used, or
	// deleted again, and when a context being deleted is deleted again,
	// has workers removed or moved out of it, or gets a sub-context (the
	// message says "being deleted"). A context being deleted still
	// accepts workers (AddWorkers, MoveWorkers into it) to complete its
	// tasks.
	ErrContextDeleted = errors.New("scheduler: context deleted")
	// ErrContextStopped is returned by Submit for a context that refuses
	// tasks: after StopSubmission, FinishedSubmitting or Delete.
	ErrContextStopped = errors.New("scheduler: context does not accept tasks")
	// ErrNoWorkers is joined to the error of WaitAll (and Context.WaitAll)
	// when its ctx ends while a context holds tasks and has too few
	// workers to run them: none, or fewer than a team task it holds
	// needs (the message says which, and how many).
	ErrNoWorkers = errors.New("scheduler: context lacks workers for its tasks")
)

// GlobalName is the name of the global context, which every worker
// belongs to and which runs the tasks submitted to no other context.
const GlobalName = "global"

// A Context is a scheduling context (StarPU's sched_ctx): a set of
// workers with its own policy, to which tasks are submitted. A worker
// belongs to one context at a time per level of nesting; contexts form
// a tree rooted at the global context. A worker pops tasks from its
// context first, then from its ancestors (a worker of a cluster, a
// context without policy, only from its cluster). A Context is safe for
// concurrent use.
type Context struct {
	s       *Scheduler
	id      int
	name    string
	parent  *Context
	policy  Policy
	polName string
	cluster bool
	// chain is what a member pops from: c, its parent, ..., global (for a
	// cluster: c alone). ancestors is c, parent, ..., excluding global:
	// the contexts whose pending count a task of c adds to. Immutable.
	chain     []*Context
	ancestors []*Context

	// Guarded by s.cx.mu.
	children  []*Context
	inheritor *Context

	state   lifecycle  // open, stopped, finishing, ... (context_state.go)
	pending zeroWaiter // tasks of c and its sub-contexts not completed
	gone    chan struct{}

	amu     sync.Mutex            // serializes updates of applied
	applied atomic.Pointer[[]int] // workers that pop from c now, sorted

	errs errorLog // errors of c's own tasks

	teamMu sync.Mutex
	teams  map[int]int // team size -> tasks of that size not completed

	// kinds is the kindSet of the workers in c's subtree (its members
	// as the API set them, not yet applied perhaps): 0 for none. Written
	// under s.cx.mu (recountKindsLocked), read by Submit.
	kinds atomic.Uint32
}

// MinWorkers returns the number of workers c needs to run its pending
// tasks: the largest team (WithTeam) among its tasks not yet completed,
// 1 when it has other tasks, 0 when none. A resize that leaves c fewer
// workers parks such a team until workers come back (WaitAll with a
// deadline then reports ErrNoWorkers); a hypervisor keeps at least this
// many.
func (c *Context) MinWorkers() int {
	c.teamMu.Lock()
	n := 0
	for size, count := range c.teams {
		if count > 0 {
			n = max(n, size)
		}
	}
	c.teamMu.Unlock()
	if n == 0 && c.Pending() > 0 {
		n = 1
	}
	return n
}

// A Resize records one worker changing context, at the moment the worker
// applied it (at a safe point).
type Resize struct {
	// At is the time since the scheduler started.
	At time.Duration
	// Worker is the worker's id.
	Worker int
	// From and To are the names of the contexts the worker left and
	// joined (its innermost contexts); FromID and ToID their ids.
	From, To     string
	FromID, ToID int
	// Reason says who asked: "add", "remove", "move", "delete",
	// "finished", "close" or what a Monitor passed to MoveWorkersFor.
	Reason string
}

// String formats r as one line.
func (r Resize) String() string {
	return fmt.Sprintf("%.3fms worker %d: %s -> %s (%s)", float64(r.At)/1e6, r.Worker, r.From, r.To, r.Reason)
}

// ctxKey is the context.Context key of the default scheduling context.
type ctxKey struct{}

// Within returns a copy of ctx carrying c as the default scheduling
// context: tasks submitted with it and without InContext go to c (the
// Go form of starpu_sched_ctx_set_context, scoped to a call tree rather
// than a thread), and WaitAll with it waits for c's tasks only.
func Within(ctx context.Context, c *Context) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

// ContextOf returns the scheduling context that Within stored in ctx,
// or nil.
func ContextOf(ctx context.Context) *Context {
	c, _ := ctx.Value(ctxKey{}).(*Context)
	return c
}

// InContext submits the task to scheduling context c (the same as
// setting Task.Context).
func InContext(c *Context) Arg { return Arg{kind: argContext, v: c} }

// A ContextOption configures NewContext.
type ContextOption func(*ctxConfig)

type ctxConfig struct {
	workers    []int
	count      int
	policy     string
	policyImpl func(PolicyConfig) Policy
	inheritor  *Context
}

// ContextWorkers gives the new context these workers, which must be
// free in its parent (members of the parent and of none of its other
// sub-contexts).
func ContextWorkers(ids ...int) ContextOption {
	return func(c *ctxConfig) { c.workers = append(c.workers, ids...) }
}

// ContextSize gives the new context n workers, the free workers of its
// parent with the lowest ids.
func ContextSize(n int) ContextOption { return func(c *ctxConfig) { c.count = n } }

// ContextPolicy sets the new context's policy by name (see Policies; ""
// takes the scheduler's). "none" makes a cluster: a context whose tasks
// run one at a time on its first worker (the lowest id given to it)
// while its other workers take no tasks at all, left to the runtime the
// task starts (OpenMP-like pools); the task finds them with
// Call.Task.Context.Workers(). That holds from the first task on: a
// task submitted before the first worker has joined the cluster (at its
// next safe point) waits for it, whichever workers joined first.
func ContextPolicy(name string) ContextOption { return func(c *ctxConfig) { c.policy = name } }

// ContextPolicyFunc installs a custom policy in the new context.
func ContextPolicyFunc(newPolicy func(PolicyConfig) Policy) ContextOption {
	return func(c *ctxConfig) { c.policyImpl = newPolicy }
}

// ContextInheritor sets the context that gets the new context's workers
// when it is finished (see FinishedSubmitting); default its parent.
func ContextInheritor(c *Context) ContextOption { return func(cc *ctxConfig) { cc.inheritor = c } }

// Global returns the global context: every worker is in it, and tasks
// submitted to no other context go to it.
func (s *Scheduler) Global() *Context { return s.cx.global }

// Contexts returns the live contexts, the global one first.
func (s *Scheduler) Contexts() []*Context {
	s.cx.mu.Lock()
	defer s.cx.mu.Unlock()
	return slices.Clone(s.cx.all)
}

// WorkerContext returns the innermost context worker id belongs to (or
// is moving to), or nil for an invalid id and for a driven worker that
// left the scheduler (its Driver's Deinit, or the end of its Run).
func (s *Scheduler) WorkerContext(id int) *Context {
	s.cx.mu.Lock()
	defer s.cx.mu.Unlock()
	if id < 0 || id >= len(s.workers) || s.cx.target[id] == s.cx.retired {
		return nil
	}
	return s.cx.target[id]
}

// Resizes returns the context changes of workers so far, in the order
// applied: their At times never decrease. A scheduler that records
// (WithStats, WithTrace) returns every one; otherwise it keeps only the
// latest 4,096, so that a long program that moves workers (a
// hypervisor, a context created and deleted per phase) stays flat in
// memory.
func (s *Scheduler) Resizes() []Resize {
	s.cx.mu.Lock()
	defer s.cx.mu.Unlock()
	return s.cx.resizes.Latest()
}

// ResizeCount returns how many context changes of workers were made so
// far, those Resizes no longer lists included.
func (s *Scheduler) ResizeCount() int {
	s.cx.mu.Lock()
	defer s.cx.mu.Unlock()
	return s.cx.resizes.Total()
}

// NewContext creates a context of the global context (see
// Context.NewContext).
func (s *Scheduler) NewContext(name string, opts ...ContextOption) (*Context, error) {
	return s.Global().NewContext(name, opts...)
}

// NewContext creates a sub-context of c named name, with the workers of
// ContextWorkers or ContextSize taken from c's free workers (none by
// default: an empty context keeps its tasks until workers are added) and
// the policy of ContextPolicy. A cluster cannot have sub-contexts. The
// name must be non-empty, other than GlobalName and unlike the name of
// every context of the scheduler not yet deleted (those being deleted
// included: errors, Resizes and traces name contexts by it); NewContext
// fails with ErrBadContext otherwise, and with ErrClosed after Close.
func (c *Context) NewContext(name string, opts ...ContextOption) (*Context, error) {
	var cfg ctxConfig
	for _, o := range opts {
		o(&cfg)
	}
	s := c.s
	switch name {
	case "":
		return nil, fmt.Errorf("%w: a new context in %q needs a name (it names the context in errors, Resizes and traces)", ErrBadContext, c.name)
	case GlobalName:
		return nil, fmt.Errorf("%w: context name %q is reserved for the global context; choose another", ErrBadContext, name)
	}
	if cfg.count < 0 {
		return nil, fmt.Errorf("%w: context %q: ContextSize(%d) is negative", ErrBadContext, name, cfg.count)
	}
	if cfg.count > 0 && len(cfg.workers) > 0 {
		return nil, fmt.Errorf("%w: context %q: give ContextWorkers or ContextSize, not both", ErrBadContext, name)
	}
	if cfg.inheritor != nil && cfg.inheritor.s != s {
		return nil, fmt.Errorf("%w: context %q: inheritor %q belongs to another scheduler", ErrBadContext, name, cfg.inheritor.name)
	}
	nc := &Context{s: s, name: name, parent: c, gone: make(chan struct{}), inheritor: cfg.inheritor}
	polName := cfg.policy
	switch {
	case cfg.policyImpl != nil:
		nc.policy = cfg.policyImpl(s.policyConfig())
	case polName == "none":
		nc.cluster = true
		cp := &clusterPolicy{}
		cp.setMaster(-1, CPUWorker)
		nc.policy = cp
	default:
		if polName == "" {
			polName = s.cfg.policy
			if s.cfg.policyImpl != nil {
				nc.policy = s.cfg.policyImpl(s.policyConfig())
				break
			}
		}
		f, err := lookupPolicy(polName)
		if err != nil {
			return nil, fmt.Errorf("context %q: %w", name, err)
		}
		nc.policy = f(s.policyConfig())
	}
	nc.polName = nc.policy.Name()
	if nc.cluster {
		nc.polName = "none"
	}
	empty := []int{}
	nc.applied.Store(&empty)

	s.cx.mu.Lock()
	if err := s.checkContextLocked(c, false); err != nil {
		s.cx.mu.Unlock()
		return nil, fmt.Errorf("creating context %q: %w", name, err)
	}
	if i := slices.IndexFunc(s.cx.all, func(x *Context) bool { return x.name == name }); i >= 0 {
		s.cx.mu.Unlock()
		how := ""
		if s.cx.all[i].state.load().gone() {
			how = " (being deleted: wait for its Deleted channel)"
		}
		return nil, fmt.Errorf("%w: context name %q is in use by a live context%s; choose another", ErrBadContext, name, how)
	}
	if c.cluster {
		s.cx.mu.Unlock()
		return nil, fmt.Errorf("%w: cluster %q cannot have sub-contexts", ErrBadContext, c.name)
	}
	ids := cfg.workers
	if cfg.count > 0 {
		for id, l := range s.cx.target {
			if l == c && len(ids) < cfg.count {
				ids = append(ids, id)
			}
		}
		if len(ids) < cfg.count {
			s.cx.mu.Unlock()
			return nil, fmt.Errorf("%w: context %q wants %d workers, %q has %d free", ErrBadWorker, name, cfg.count, c.name, len(ids))
		}
	}
	if err := s.checkFreeLocked(nc, c, ids); err != nil {
		s.cx.mu.Unlock()
		return nil, fmt.Errorf("context %q: %w", name, err)
	}
	nc.id = s.cx.nextID
	s.cx.nextID++
	if nc.cluster {
		nc.chain = []*Context{nc}
	} else {
		nc.chain = append([]*Context{nc}, c.chain...)
	}
	for x := nc; x != nil && x.parent != nil; x = x.parent {
		nc.ancestors = append(nc.ancestors, x)
	}
	c.children = append(c.children, nc)
	s.cx.all = append(s.cx.all, nc)
	s.cx.n.Add(1)
	moved := s.retargetLocked(ids, nc, "add")
	s.cx.mu.Unlock()
	s.wakeMoved(moved)
	return nc, nil
}

// ID returns the context's id (0 for the global context).
func (c *Context) ID() int { return c.id }

// Name returns the context's name.
func (c *Context) Name() string { return c.name }

// PolicyName returns the name of the context's policy ("none" for a
// cluster).
func (c *Context) PolicyName() string { return c.polName }

// Parent returns the context c is a sub-context of, nil for the global
// context.
func (c *Context) Parent() *Context { return c.parent }

// Scheduler returns the scheduler c belongs to.
func (c *Context) Scheduler() *Scheduler { return c.s }

// String returns the context as messages name it, `context "NAME"`
// (Name returns the name alone).
func (c *Context) String() string { return fmt.Sprintf("context %q", c.name) }

// Children returns the live sub-contexts of c.
func (c *Context) Children() []*Context {
	c.s.cx.mu.Lock()
	defer c.s.cx.mu.Unlock()
	return slices.Clone(c.children)
}

// Workers returns the ids of the workers in c and its sub-contexts,
// sorted: those already there and those moving there.
func (c *Context) Workers() []int {
	s := c.s
	s.cx.mu.Lock()
	defer s.cx.mu.Unlock()
	return c.workersLocked()
}

// Pending returns the number of tasks submitted to c and its
// sub-contexts that have not completed. For the global context it is
// the scheduler's count of tasks in flight, to which a busy worker
// reports its completions in batches (of 64: counting each at once
// would make every completion contend with every submission for one
// counter): until the workers run out of tasks, it may include up to 63
// tasks per busy worker that have completed. It is exact once they are
// idle, and WaitAll waits for the exact count.
func (c *Context) Pending() int64 {
	if c.parent == nil {
		return max(c.s.inflight.n.Load(), 0)
	}
	return max(c.pending.n.Load(), 0)
}

// Deleted returns a channel closed once c is deleted (see Delete).
func (c *Context) Deleted() <-chan struct{} { return c.gone }

// AddWorkers adds workers to c; each must be free in c's parent (see
// ContextWorkers). They join at their next safe point; tasks already
// queued in c (an empty context keeps them) start running then. Nothing
// changes if any id is invalid. A context being deleted accepts workers
// too: they run its remaining tasks, then move to its inheritor. It
// fails with ErrContextDeleted for a deleted context and with ErrClosed
// after Close.
func (c *Context) AddWorkers(ids ...int) error {
	s := c.s
	s.cx.mu.Lock()
	if err := s.checkContextLocked(c, true); err != nil {
		s.cx.mu.Unlock()
		return fmt.Errorf("adding workers to %q: %w", c.name, err)
	}
	if c.parent == nil {
		s.cx.mu.Unlock()
		return nil // every worker is in the global context
	}
	if err := s.checkFreeLocked(c, c.parent, ids); err != nil {
		s.cx.mu.Unlock()
		return fmt.Errorf("adding workers to %q: %w", c.name, err)
	}
	moved := s.retargetLocked(ids, c, "add")
	s.cx.mu.Unlock()
	s.wakeMoved(moved)
	return nil
}

// RemoveWorkers gives workers of c (or of its sub-contexts) back to c's
// parent. Each leaves at its next safe point: a task it is running
// completes first, and the tasks queued for it alone are handed to c's
// other workers (or kept, if none is left). The global context keeps
// every worker. It fails with ErrContextDeleted for a context deleted or
// being deleted (its workers stay until its last task completes) and
// with ErrClosed after Close.
func (c *Context) RemoveWorkers(ids ...int) error {
	s := c.s
	s.cx.mu.Lock()
	err := s.checkContextLocked(c, false)
	if err == nil && c.parent == nil {
		err = fmt.Errorf("%w: the global context keeps every worker; move workers between other contexts", ErrBadContext)
	}
	if err == nil {
		err = s.checkMembersLocked(c, ids)
	}
	if err != nil {
		s.cx.mu.Unlock()
		return fmt.Errorf("removing workers from %q: %w", c.name, err)
	}
	moved := s.retargetLocked(ids, c.parent, "remove")
	s.cx.mu.Unlock()
	s.wakeMoved(moved)
	return nil
}

// MoveWorkers moves workers of from (or of its sub-contexts) to to, each
// at its next safe point (see RemoveWorkers). Both contexts must be s's,
// and different (ErrBadContext otherwise). from must not be deleted or
// being deleted (ErrContextDeleted); to may be being deleted: the
// workers run its remaining tasks, then move to its inheritor (see
// Delete). It fails with ErrClosed after Close.
func (s *Scheduler) MoveWorkers(from, to *Context, ids ...int) error {
	return s.MoveWorkersFor("move", from, to, ids...)
}

// MoveWorkersFor is MoveWorkers recording reason in the Resizes (a
// hypervisor passes its policy's name).
func (s *Scheduler) MoveWorkersFor(reason string, from, to *Context, ids ...int) error {
	if from == nil || to == nil {
		return fmt.Errorf("%w: MoveWorkers needs two contexts", ErrBadContext)
	}
	s.cx.mu.Lock()
	err := s.checkContextLocked(from, false)
	if err == nil {
		err = s.checkContextLocked(to, true)
	}
	if err == nil && from == to {
		err = fmt.Errorf("%w: the source and destination are the same context; to give workers of its sub-contexts back to it, use RemoveWorkers on the sub-context", ErrBadContext)
	}
	if err == nil {
		err = s.checkMembersLocked(from, ids)
	}
	if err != nil {
		s.cx.mu.Unlock()
		return fmt.Errorf("moving workers %v from %q to %q: %w", ids, from.name, to.name, err)
	}
	moved := s.retargetLocked(ids, to, reason)
	s.cx.mu.Unlock()
	s.wakeMoved(moved)
	return nil
}

// checkContextLocked checks that the scheduler is not closed and that c
// is one of its contexts, not deleted; a context being deleted passes
// only when joining (it is the destination of the workers: they run its
// remaining tasks, then move on to its inheritor).
func (s *Scheduler) checkContextLocked(c *Context, joining bool) error {
	switch {
	case c == nil:
		return fmt.Errorf("%w: nil context", ErrBadContext)
	case c.s != s:
		return fmt.Errorf("%w: %q belongs to another scheduler", ErrBadContext, c.name)
	case s.closed.Load():
		return ErrClosed // the scheduler's state, not c's: callers name c
	}
	switch c.state.load() {
	case ctxDeleted:
		return fmt.Errorf("%w: %q was deleted", ErrContextDeleted, c.name)
	case ctxDeleting:
		if !joining {
			return fmt.Errorf("%w: %q is being deleted: its workers stay until its last task completes, then move to its inheritor", ErrContextDeleted, c.name)
		}
	}
	return nil
}

// SetInheritor sets the context that gets c's workers when c is
// finished (FinishedSubmitting) or deleted; nil means c's parent. It
// fails with ErrContextDeleted for a deleted context, and with
// ErrBadContext for an inheritor that cannot inherit (see Delete).
func (c *Context) SetInheritor(in *Context) error {
	s := c.s
	s.cx.mu.Lock()
	defer s.cx.mu.Unlock()
	if c.state.load() == ctxDeleted {
		return fmt.Errorf("setting the inheritor of %q: %w: %q was deleted", c.name, ErrContextDeleted, c.name)
	}
	if err := c.checkInheritorLocked(in); err != nil {
		return err
	}
	c.inheritor = in
	return nil
}

func (c *Context) checkInheritorLocked(in *Context) error {
	if in == nil {
		return nil
	}
	switch {
	case in.s != c.s:
		return fmt.Errorf("%w: inheritor %q of %q belongs to another scheduler", ErrBadContext, in.name, c.name)
	case in.state.load() == ctxDeleted:
		return fmt.Errorf("%w: inheritor %q of %q is deleted", ErrBadContext, in.name, c.name)
	case in.state.load().gone():
		// It still runs its last tasks, but its workers leave with them.
		return fmt.Errorf("%w: inheritor %q of %q is being deleted: its workers go to its own inheritor when its last task completes; name that one", ErrBadContext, in.name, c.name)
	case in.isIn(c):
		return fmt.Errorf("%w: %q cannot inherit from %q: it is the context itself or one of its sub-contexts", ErrBadContext, in.name, c.name)
	}
	return nil
}

func names(cs []*Context) string {
	var b strings.Builder
	for i, c := range cs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.name)
	}
	return b.String()
}

// WaitAll blocks until every task submitted to c and its sub-contexts
// has completed, or ctx ends, and returns their errors joined (as
// Scheduler.WaitAll does). When ctx ends while c or a sub-context has
// tasks and no workers, the error also wraps ErrNoWorkers and names it.
// Unlike Scheduler.WaitAll it neither combines pending reductions nor
// copies device data back to RAM: other contexts may be using them (see
// Handle.Fetch).
func (c *Context) WaitAll(ctx context.Context) error {
	if c.parent == nil {
		return c.s.WaitAll(context.WithValue(ctx, ctxKey{}, nil))
	}
	if err := c.s.checkNotInTask(fmt.Sprintf("WaitAll of context %q", c.name)); err != nil {
		return err
	}
	c.s.flushBatches()
	if err := c.pending.wait(ctx); err != nil {
		err = fmt.Errorf("scheduler: waiting for %q: %w (up to %s pending)", c.name, err, tasks(c.Pending()))
		return c.s.stuckErrorIn(c, err)
	}
	return c.takeErrors(true)
}
