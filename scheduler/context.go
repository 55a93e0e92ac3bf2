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

	"go.uber.org/zap"
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
	// or a context that still has sub-contexts, and similar misuse.
	ErrBadContext = errors.New("scheduler: invalid context")
	// ErrContextDeleted is returned when a deleted context (or one being
	// deleted) is used or deleted again.
	ErrContextDeleted = errors.New("scheduler: context deleted")
	// ErrContextStopped is returned by Submit for a context that refuses
	// tasks: after StopSubmission, FinishedSubmitting or Delete.
	ErrContextStopped = errors.New("scheduler: context does not accept tasks")
	// ErrNoWorkers is joined to the error of WaitAll (and Context.WaitAll)
	// when its ctx ends while a context holds tasks and has no workers to
	// run them.
	ErrNoWorkers = errors.New("scheduler: context has tasks and no workers")
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

func (c *Context) countTeam(size, d int) {
	c.teamMu.Lock()
	if c.teams == nil {
		c.teams = make(map[int]int)
	}
	c.teams[size] += d
	if c.teams[size] == 0 {
		delete(c.teams, size)
	}
	c.teamMu.Unlock()
}

// contexts is the scheduler's context state. Lock discipline: cx.mu,
// each Context's amu and error log and the tasks' locks are leaves: code
// holding one of them never takes another, and never blocks. Inside a
// policy, the membership lock may be held while a queue's lock is taken
// (never the reverse), and no policy lock is held while calling out of
// the policy. A worker's membership is changed only by the
// worker itself, at a safe point (the start of Pop), on a request that
// other goroutines post with an atomic flag: no goroutine ever holds a
// lock of a worker, so there is no lock order to invert.
type contexts struct {
	n       atomic.Int32 // live contexts other than global: 0 keeps hot paths free
	mon     atomic.Pointer[monitorBox]
	mu      sync.Mutex
	global  *Context   // set by New, immutable
	all     []*Context // live contexts, global first
	nextID  int
	target  []*Context // by worker id: the innermost context it is in or moving to
	reason  []string   // by worker id: why it was last moved
	resizes []Resize
}

// workerCx is a worker's context state; only the worker writes chain
// and idleStart.
type workerCx struct {
	moveReq   atomic.Bool
	chain     atomic.Pointer[[]*Context] // the contexts it pops from now, innermost first
	idleStart int64                      // ns since epoch, 0 when busy (monitored only)
	timer     *time.Timer
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

// WithLogger sets the logger that records every context resize (Info)
// and workers lent at Close (Warn). Default: none.
func WithLogger(l *zap.Logger) Option { return func(c *config) { c.logger = l } }

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
// run one at a time on its first worker while its other workers take no
// tasks at all, left to the runtime the task starts (OpenMP-like pools);
// the task finds them with Call.Task.Context.Workers().
func ContextPolicy(name string) ContextOption { return func(c *ctxConfig) { c.policy = name } }

// ContextPolicyFunc installs a custom policy in the new context.
func ContextPolicyFunc(newPolicy func(PolicyConfig) Policy) ContextOption {
	return func(c *ctxConfig) { c.policyImpl = newPolicy }
}

// ContextInheritor sets the context that gets the new context's workers
// when it is finished (see FinishedSubmitting); default its parent.
func ContextInheritor(c *Context) ContextOption { return func(cc *ctxConfig) { cc.inheritor = c } }

// newGlobalContext creates the global context, of every worker, before
// the workers start (New).
func (s *Scheduler) newGlobalContext() {
	n := len(s.workers)
	g := &Context{s: s, id: 0, name: GlobalName, policy: s.policy, polName: s.policy.Name(), gone: make(chan struct{})}
	g.chain = []*Context{g}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	g.applied.Store(&all)
	s.cx.global = g
	s.cx.all = []*Context{g}
	s.cx.nextID = 1
	s.cx.target = make([]*Context, n)
	for i := range s.cx.target {
		s.cx.target[i] = g
	}
	s.cx.reason = make([]string, n)
	for _, w := range s.workers {
		w.cx.chain.Store(&g.chain)
	}
}

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
// is moving to), or nil for an invalid id.
func (s *Scheduler) WorkerContext(id int) *Context {
	s.cx.mu.Lock()
	defer s.cx.mu.Unlock()
	if id < 0 || id >= len(s.workers) {
		return nil
	}
	return s.cx.target[id]
}

// Resizes returns every context change of a worker so far, in the order
// applied.
func (s *Scheduler) Resizes() []Resize {
	s.cx.mu.Lock()
	defer s.cx.mu.Unlock()
	return slices.Clone(s.cx.resizes)
}

// NewContext creates a context of the global context (see
// Context.NewContext).
func (s *Scheduler) NewContext(name string, opts ...ContextOption) (*Context, error) {
	return s.Global().NewContext(name, opts...)
}

// NewContext creates a sub-context of c named name, with the workers of
// ContextWorkers or ContextSize taken from c's free workers (none by
// default: an empty context keeps its tasks until workers are added) and
// the policy of ContextPolicy. A cluster cannot have sub-contexts.
func (c *Context) NewContext(name string, opts ...ContextOption) (*Context, error) {
	var cfg ctxConfig
	for _, o := range opts {
		o(&cfg)
	}
	s := c.s
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
		cp.mid.Store(-1)
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
	if c.s != s || c.state.load().gone() {
		s.cx.mu.Unlock()
		return nil, fmt.Errorf("%w: cannot create %q in deleted context %q", ErrContextDeleted, name, c.name)
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
	if nc.name == "" {
		nc.name = fmt.Sprintf("ctx%d", nc.id)
	}
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

// policyConfig is what context policies are built with.
func (s *Scheduler) policyConfig() PolicyConfig {
	return PolicyConfig{
		Seed:     uint64(time.Now().UnixNano()),
		Estimate: s.estimate,
		Now:      s.now,
	}
}

// checkFreeLocked checks that ids are valid, distinct workers whose
// current context is c's parent p (free to join c), or c or inside c.
func (s *Scheduler) checkFreeLocked(c, p *Context, ids []int) error {
	for i, id := range ids {
		if id < 0 || id >= len(s.workers) {
			return fmt.Errorf("%w: worker %d does not exist (ids are 0..%d)", ErrBadWorker, id, len(s.workers)-1)
		}
		if slices.Contains(ids[:i], id) {
			return fmt.Errorf("%w: worker %d is listed twice", ErrBadWorker, id)
		}
		l := s.cx.target[id]
		if l == c || l.isIn(c) {
			continue // already a member: no change
		}
		if l != p {
			if p.isIn(l) {
				return fmt.Errorf("%w: worker %d is not in %q (it is in %q); add it there first", ErrBadWorker, id, p.name, l.name)
			}
			return fmt.Errorf("%w: worker %d is in context %q; move it (MoveWorkers) or remove it from there first", ErrWorkerBusy, id, l.name)
		}
	}
	return nil
}

// isIn reports whether c is a or a descendant of a.
func (c *Context) isIn(a *Context) bool {
	for x := c; x != nil; x = x.parent {
		if x == a {
			return true
		}
	}
	return false
}

// retargetLocked makes to the context of the workers ids (whose current
// context is not already to or inside it) and posts the change to them.
// It returns the workers to wake once cx.mu is released.
func (s *Scheduler) retargetLocked(ids []int, to *Context, reason string) []int {
	var moved []int
	for _, id := range ids {
		l := s.cx.target[id]
		if l == to || (reason == "add" && l.isIn(to)) {
			continue
		}
		s.cx.target[id] = to
		s.cx.reason[id] = reason
		moved = append(moved, id)
	}
	return moved
}

// wakeMoved flags the workers' pending moves and wakes them so that they
// apply the moves at their next safe point.
func (s *Scheduler) wakeMoved(ids []int) {
	for _, id := range ids {
		w := s.workers[id]
		w.cx.moveReq.Store(true)
		if !s.wakeWorker(w) {
			// Not asleep: it may be waiting for a team to form
			// (awaitTeam), which a token on wake lets go; a worker
			// that is busy only finds the token at its next sleep.
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
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

// String returns the context's name.
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

func (c *Context) workersLocked() []int {
	var ids []int
	for id, l := range c.s.cx.target {
		if l.isIn(c) {
			ids = append(ids, id)
		}
	}
	return ids
}

// Pending returns the number of tasks submitted to c and its
// sub-contexts that have not completed.
func (c *Context) Pending() int64 {
	if c.parent == nil {
		return c.s.inflight.n.Load()
	}
	return max(c.pending.n.Load(), 0)
}

// Deleted returns a channel closed once c is deleted (see Delete).
func (c *Context) Deleted() <-chan struct{} { return c.gone }

// AddWorkers adds workers to c; each must be free in c's parent (see
// ContextWorkers). They join at their next safe point; tasks already
// queued in c (an empty context keeps them) start running then. Nothing
// changes if any id is invalid.
func (c *Context) AddWorkers(ids ...int) error {
	s := c.s
	s.cx.mu.Lock()
	if err := c.usableLocked(); err != nil {
		s.cx.mu.Unlock()
		return err
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
// every worker.
func (c *Context) RemoveWorkers(ids ...int) error {
	s := c.s
	s.cx.mu.Lock()
	err := c.usableLocked()
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
// at its next safe point (see RemoveWorkers).
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
	err := from.usableLocked()
	if err == nil {
		err = to.usableLocked()
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

// usableLocked checks that c belongs to this scheduler and is live.
func (c *Context) usableLocked() error {
	if c == nil {
		return fmt.Errorf("%w: nil context", ErrBadContext)
	}
	if c.state.load().gone() {
		return fmt.Errorf("%w: %q", ErrContextDeleted, c.name)
	}
	return nil
}

// checkMembersLocked checks that ids are distinct workers of c's subtree.
func (s *Scheduler) checkMembersLocked(c *Context, ids []int) error {
	for i, id := range ids {
		if id < 0 || id >= len(s.workers) {
			return fmt.Errorf("%w: worker %d does not exist (ids are 0..%d)", ErrBadWorker, id, len(s.workers)-1)
		}
		if slices.Contains(ids[:i], id) {
			return fmt.Errorf("%w: worker %d is listed twice", ErrBadWorker, id)
		}
		if !s.cx.target[id].isIn(c) {
			return fmt.Errorf("%w: worker %d is in %q, not in %q", ErrBadWorker, id, s.cx.target[id].name, c.name)
		}
	}
	return nil
}

// SetInheritor sets the context that gets c's workers when c is
// finished (FinishedSubmitting); nil means c's parent.
func (c *Context) SetInheritor(in *Context) error {
	s := c.s
	s.cx.mu.Lock()
	defer s.cx.mu.Unlock()
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
	case in.state.load().gone():
		return fmt.Errorf("%w: inheritor %q of %q is deleted", ErrBadContext, in.name, c.name)
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
func (c *Context) WaitAll(ctx context.Context) error {
	if c.parent == nil {
		return c.s.WaitAll(context.WithValue(ctx, ctxKey{}, nil))
	}
	if err := c.pending.wait(ctx); err != nil {
		err = fmt.Errorf("scheduler: waiting for %q: %w (%d tasks not completed)", c.name, err, c.Pending())
		return c.s.stuckError(err)
	}
	return c.takeErrors(true)
}

// takeErrors returns and clears the errors of c (and, with sub, of its
// sub-contexts).
func (c *Context) takeErrors(sub bool) error {
	var errs []error
	if err := c.errs.take(fmt.Sprintf(" of %q", c.name)); err != nil {
		errs = append(errs, err)
	}
	if sub {
		for _, ch := range c.Children() {
			if err := ch.takeErrors(true); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// takeContextErrors returns the errors of every context's tasks not yet
// returned, for Scheduler.WaitAll.
func (s *Scheduler) takeContextErrors() error {
	s.cx.mu.Lock()
	all := slices.Clone(s.cx.all)
	s.cx.mu.Unlock()
	var errs []error
	for _, c := range all {
		if c.parent != nil {
			if err := c.takeErrors(false); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// recordTask keeps t's error for the WaitAll of its context.
func (s *Scheduler) recordTask(t *Task, err error) {
	if c := t.Context; c != nil && c.parent != nil {
		c.errs.record(err)
		return
	}
	s.errs.record(err)
}

// stuckError joins to err one ErrNoWorkers error per context that holds
// tasks and has no workers.
func (s *Scheduler) stuckError(err error) error {
	if s.cx.n.Load() == 0 {
		return err
	}
	errs := []error{err}
	for _, c := range s.stuckContexts() {
		errs = append(errs, fmt.Errorf("%w: %q has %d tasks pending and no workers; give it workers (AddWorkers, MoveWorkers) or submit elsewhere", ErrNoWorkers, c.name, c.Pending()))
	}
	for c, t := range s.parkedTeams() {
		errs = append(errs, teamNeedError(c, t, s.poppers(c)))
	}
	return errors.Join(errs...)
}

// stuckContexts returns the live contexts with tasks of their own and no
// workers.
func (s *Scheduler) stuckContexts() []*Context {
	s.cx.mu.Lock()
	defer s.cx.mu.Unlock()
	var out []*Context
	for _, c := range s.cx.all {
		if c.parent == nil || c.pending.n.Load() == 0 {
			continue
		}
		busyKids := int64(0)
		for _, ch := range c.children {
			busyKids += ch.pending.n.Load()
		}
		if c.pending.n.Load() > busyKids && len(c.workersLocked()) == 0 {
			out = append(out, c)
		}
	}
	return out
}

// enterContext resolves t's context (Task.Context, else the default of
// ctx) and counts t in it; it fails for a context that refuses tasks.
func (s *Scheduler) enterContext(ctx context.Context, t *Task) error {
	c := t.Context
	if c == nil {
		c = ContextOf(ctx)
		if c == nil {
			return nil
		}
	}
	if c.s != s {
		return fmt.Errorf("%w: task %q submitted to %q of another scheduler", ErrBadContext, t.Codelet.name(), c.name)
	}
	if c.parent == nil {
		t.Context = nil
		return nil
	}
	if t.Team > 1 {
		if n := len(c.Workers()); t.Team > n {
			return fmt.Errorf("%w: task %q asks for a team of %d workers, context %q has %d", ErrBadTeam, t.Codelet.name(), t.Team, c.name, n)
		}
	}
	for _, x := range c.ancestors {
		x.pending.add(1)
	}
	if st := c.state.load(); !st.accepting() {
		c.leaveCount()
		if st == ctxDeleted {
			return fmt.Errorf("task %q: %w: %w: %q", t.Codelet.name(), ErrContextStopped, ErrContextDeleted, c.name)
		}
		return fmt.Errorf("task %q: %w: %q (stopped, finished or being deleted)", t.Codelet.name(), ErrContextStopped, c.name)
	}
	t.Context = c
	if t.Team > 1 {
		c.countTeam(t.Team, 1)
	}
	return nil
}

// leaveCount uncounts one task of c and runs c's (or an ancestor's)
// closing action if it was the last.
func (c *Context) leaveCount() {
	for _, x := range c.ancestors {
		if x.pending.add(-1) == 0 {
			x.settle()
		}
	}
}

// taskDone is called once per completed task t of c.
func (c *Context) taskDone(t *Task) {
	if t.Team > 1 {
		c.countTeam(t.Team, -1)
	}
	if c.cluster {
		c.policy.(*clusterPolicy).running.Store(false)
		c.wakeAll()
	}
	if c.parent != nil {
		c.leaveCount()
	}
}

// push hands a ready task to c's policy and wakes a worker of c (the one
// the policy named, if asleep); notify tells the monitor (not for a task
// handed back by a leaving worker).
func (c *Context) push(t *Task, w *worker, notify bool) {
	from := -1
	if w != nil {
		from = w.info.ID
	}
	hint := c.policy.Push(t, from)
	if notify {
		if m := c.s.cx.mon.Load(); m != nil {
			m.m.TaskPushed(c, t)
		}
	}
	c.wake(hint, from)
}

// wake wakes the worker the policy named, or a sleeping worker that pops
// from c.
func (c *Context) wake(hint, from int) {
	s := c.s
	switch {
	case hint == NoWorker:
		return
	case hint >= 0 && hint < len(s.workers):
		if s.wakeWorker(s.workers[hint]) || hint == from {
			return
		}
	}
	if s.nsleep.Load() == 0 {
		return
	}
	for _, id := range *c.applied.Load() {
		if id != from && s.wakeWorker(s.workers[id]) {
			return
		}
	}
}

// wakeAll wakes every sleeping worker that pops from c.
func (c *Context) wakeAll() {
	for _, id := range *c.applied.Load() {
		c.s.wakeWorker(c.s.workers[id])
	}
}

// join makes w pop from c (w is at a safe point).
func (c *Context) join(w *worker) {
	c.policy.AddWorkers(w.info)
	c.amu.Lock()
	ids := append(slices.Clone(*c.applied.Load()), w.info.ID)
	slices.Sort(ids)
	c.applied.Store(&ids)
	c.amu.Unlock()
	c.wakeAll()
}

// leave stops w popping from c and hands the tasks queued for w alone to
// c's other workers (w is at a safe point).
func (c *Context) leave(w *worker) {
	c.amu.Lock()
	ids := slices.DeleteFunc(slices.Clone(*c.applied.Load()), func(x int) bool { return x == w.info.ID })
	c.applied.Store(&ids)
	c.amu.Unlock()
	for _, t := range c.policy.RemoveWorkers(w.info.ID) {
		c.push(t, nil, false)
	}
	c.wakeAll()
	c.s.teamShrunk(c)
}

// applyContexts is the safe point where a worker applies the context
// change posted for it: it leaves the contexts it no longer pops from,
// then joins the new ones, outermost first.
func (w *worker) applyContexts() {
	s := w.s
	w.cx.moveReq.Store(false)
	s.cx.mu.Lock()
	target := s.cx.target[w.info.ID]
	reason := s.cx.reason[w.info.ID]
	s.cx.mu.Unlock()
	old := *w.cx.chain.Load()
	next := target.chain
	if slices.Equal(old, next) {
		return
	}
	for _, c := range old {
		if !slices.Contains(next, c) {
			c.leave(w)
		}
	}
	for i := len(next) - 1; i >= 0; i-- {
		if c := next[i]; !slices.Contains(old, c) {
			c.join(w)
		}
	}
	w.cx.chain.Store(&next)
	s.teamsGrew()
	r := Resize{At: time.Duration(s.now()), Worker: w.info.ID, From: old[0].name, FromID: old[0].id, To: next[0].name, ToID: next[0].id, Reason: reason}
	s.cx.mu.Lock()
	s.cx.resizes = append(s.cx.resizes, r)
	s.cx.mu.Unlock()
	if l := s.cfg.logger; l != nil {
		l.Info("context resize", zap.Int("worker", r.Worker), zap.String("from", r.From), zap.String("to", r.To),
			zap.String("reason", r.Reason), zap.Duration("at", r.At))
	}
}

// popChain pops from the worker's contexts, innermost first.
func (w *worker) popChain(chain []*Context) *Task {
	for _, c := range chain {
		if t := c.policy.Pop(w.info.ID); t != nil {
			return t
		}
	}
	return nil
}

// popsFrom reports whether the worker pops the tasks of c (nil: global).
func (w *worker) popsFrom(c *Context) bool {
	for _, x := range *w.cx.chain.Load() {
		if x == c || (c == nil && x.parent == nil) {
			return true
		}
	}
	return false
}

// appliedContext returns the innermost context the worker pops from now
// (s.cx.target is where it is going).
func (w *worker) appliedContext() *Context { return (*w.cx.chain.Load())[0] }

// contextOf returns t's context, the global one for none.
func (s *Scheduler) contextOf(t *Task) *Context {
	if t.Context != nil {
		return t.Context
	}
	return s.cx.global
}

// lendAtClose gives each context that still holds tasks and has no
// workers one worker, so that Close completes every task: the lowest id
// worker not in a stuck context. It is logged and recorded as a
// "close" resize.
func (s *Scheduler) lendAtClose() {
	stuck := s.stuckContexts()
	need := make(map[*Context]int, len(stuck))
	for _, c := range stuck {
		need[c] = 1
	}
	for c, t := range s.parkedTeams() {
		stuck = append(stuck, c)
		need[c] = max(need[c], t.Team-s.poppers(c))
	}
	if len(stuck) == 0 {
		return
	}
	s.cx.mu.Lock()
	var moved []int
	for _, c := range stuck {
		for id, l := range s.cx.target {
			if need[c] <= 0 {
				break
			}
			if !slices.ContainsFunc(stuck, func(x *Context) bool { return l.isIn(x) }) && !slices.Contains(moved, id) {
				moved = append(moved, s.retargetLocked([]int{id}, c, "close")...)
				need[c]--
				if l := s.cfg.logger; l != nil {
					l.Warn("context has tasks and too few workers at Close: lending it a worker", zap.String("context", c.name), zap.Int("worker", id))
				}
			}
		}
	}
	s.cx.mu.Unlock()
	s.wakeMoved(moved)
}

// drainContexts waits for every task before Close stops the workers,
// lending workers to contexts that have none.
func (s *Scheduler) drainContexts() {
	if s.cx.n.Load() == 0 {
		return
	}
	for s.inflight.n.Load() != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := s.inflight.wait(ctx)
		cancel()
		if err == nil {
			return
		}
		s.lendAtClose()
	}
}

// clusterPolicy is the policy of a context without one (a cluster): one
// FIFO of tasks, popped only by the member with the lowest id, one task
// at a time (taskDone releases the next).
type clusterPolicy struct {
	q       taskQueue
	mu      sync.Mutex
	members []WorkerInfo
	mkind   atomic.Int32 // master's kind
	mid     atomic.Int32 // master's id, -1 for none
	running atomic.Bool  // a task of the cluster is running
}

func (p *clusterPolicy) Name() string { return "none" }

func (p *clusterPolicy) AddWorkers(ws ...WorkerInfo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range ws {
		if !slices.ContainsFunc(p.members, func(x WorkerInfo) bool { return x.ID == w.ID }) {
			p.members = append(p.members, w)
		}
	}
	p.elect()
}

func (p *clusterPolicy) RemoveWorkers(ids ...int) []*Task {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.members = slices.DeleteFunc(p.members, func(x WorkerInfo) bool { return slices.Contains(ids, x.ID) })
	p.elect()
	return nil // the queue is shared: the next master pops it
}

// elect makes the lowest id member the master; p.mu is held.
func (p *clusterPolicy) elect() {
	m := int32(-1)
	var k WorkerKind
	for _, w := range p.members {
		if m < 0 || int32(w.ID) < m {
			m, k = int32(w.ID), w.Kind
		}
	}
	p.mkind.Store(int32(k))
	p.mid.Store(m)
}

func (p *clusterPolicy) Push(t *Task, from int) int {
	p.q.push(t, true)
	if m := p.mid.Load(); m >= 0 {
		return int(m)
	}
	return NoWorker
}

func (p *clusterPolicy) Pop(w int) *Task {
	if int32(w) != p.mid.Load() || p.q.n.Load() == 0 || !p.running.CompareAndSwap(false, true) {
		return nil
	}
	t := p.q.popFront(WorkerKind(p.mkind.Load()))
	if t == nil {
		p.running.Store(false)
	}
	return t
}

var _ Policy = (*clusterPolicy)(nil)
