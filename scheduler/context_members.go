package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Context membership, the engine side: which context each worker is in
// (target, set by the API) and pops from (its chain, applied by the
// worker itself at a safe point), and what Close does for contexts.

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
// context is not already to or inside it), posts the change to them and
// elects the masters of the clusters they leave or join. It returns the
// workers to wake once cx.mu is released.
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
		if l.cluster {
			s.electLocked(l)
		}
	}
	if to.cluster && len(moved) > 0 {
		s.electLocked(to)
	}
	if len(moved) > 0 {
		s.recountKindsLocked()
	}
	return moved
}

// recountKindsLocked sets each live context's kinds from its members
// (after a change of membership).
func (s *Scheduler) recountKindsLocked() {
	for _, c := range s.cx.all {
		var k kindSet
		for id, l := range s.cx.target {
			if l.isIn(c) {
				k |= 1 << s.workers[id].info.Kind
			}
		}
		c.kinds.Store(uint32(k))
	}
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

func (c *Context) workersLocked() []int {
	var ids []int
	for id, l := range c.s.cx.target {
		if l.isIn(c) {
			ids = append(ids, id)
		}
	}
	return ids
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

// stuckError joins to err one ErrNoWorkers error per context that holds
// tasks and has no workers.
func (s *Scheduler) stuckError(err error) error { return s.stuckErrorIn(nil, err) }

// stuckErrorIn is stuckError for a wait on the tasks of context scope
// (and its descendants) only: what it explains is about those tasks, not
// another context's (nil: every task).
func (s *Scheduler) stuckErrorIn(scope *Context, err error) error {
	errs := append([]error{err}, s.stuckWaits(scope)...)
	for _, w := range s.workers {
		if w.driven && !w.taken.Load() {
			errs = append(errs, fmt.Errorf("%w: worker %d is left to the program (WithDrivenWorkers) and nothing drives it: the tasks the policy gives it wait for Driver(%d).Run, or Init and RunOnce", ErrDriver, w.info.ID, w.info.ID))
		}
	}
	if s.cx.n.Load() == 0 {
		return errors.Join(errs...)
	}
	for _, c := range s.stuckContexts() {
		if scope != nil && !c.isIn(scope) {
			continue
		}
		advice := "give it workers (AddWorkers, MoveWorkers) or submit elsewhere"
		if c.state.load() == ctxDeleting {
			advice = giveWhileDeleting
		}
		errs = append(errs, fmt.Errorf("%w: %q has %d tasks pending and no workers; %s", ErrNoWorkers, c.name, c.Pending(), advice))
	}
	for c, t := range s.parkedTeams() {
		if scope != nil && !c.isIn(scope) {
			continue
		}
		errs = append(errs, teamNeedError(c, t, s.poppers(c)))
	}
	return errors.Join(errs...)
}

// giveWhileDeleting is the advice of ErrNoWorkers for a context being
// deleted: it takes no more tasks, but still takes workers.
const giveWhileDeleting = "it is being deleted: give it workers (AddWorkers, MoveWorkers into it), which run its tasks and then move to its inheritor"

// hasOwnTasks reports whether c, a context other than the global one,
// has tasks pending beyond its children's. s.cx.mu is held.
func hasOwnTasks(c *Context) bool {
	if c.parent == nil {
		return false
	}
	n := c.pending.n.Load()
	for _, ch := range c.children {
		n -= ch.pending.n.Load()
	}
	return n > 0
}

// stuckContexts returns the live contexts with tasks of their own and no
// workers.
func (s *Scheduler) stuckContexts() []*Context {
	s.cx.mu.Lock()
	defer s.cx.mu.Unlock()
	var out []*Context
	for _, c := range s.cx.all {
		if hasOwnTasks(c) && len(c.workersLocked()) == 0 {
			out = append(out, c)
		}
	}
	return out
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
	r := Resize{Worker: w.info.ID, From: old[0].name, FromID: old[0].id, To: next[0].name, ToID: next[0].id, Reason: reason}
	// Timed under the lock that appends it, so that Resizes lists the
	// changes in the order of their times.
	s.cx.mu.Lock()
	r.At = time.Duration(s.now())
	s.cx.resizes = append(s.cx.resizes, r)
	s.cx.mu.Unlock()
	if l := s.cfg.logger; l != nil {
		// A move the program made itself (AddWorkers, NewContext, ...)
		// is news to nobody: Debug. The hypervisor's, and workers lent
		// to a context being deleted or at Close, are Info.
		level := zapcore.DebugLevel
		if !programMove(reason) {
			level = zapcore.InfoLevel
		}
		if ce := l.Check(level, "context resize"); ce != nil {
			ce.Write(zap.Int("worker", r.Worker), zap.String("from", r.From), zap.String("to", r.To),
				zap.String("reason", r.Reason), zap.Duration("at", r.At))
		}
	}
}

// lendAtClose gives each context that still holds tasks and has no
// workers one worker, so that Close completes every task: the lowest id
// worker not in a stuck context. When no task completed since the last
// look (stalled), it also lends each context that holds tasks and lacks
// a kind of worker one worker of each kind it lacks: a task queued there
// that none of its workers can run then runs. It is logged and recorded
// as a "close" resize.
func (s *Scheduler) lendAtClose(stalled bool) {
	stuck := s.stuckContexts()
	need := make(map[*Context]int, len(stuck))
	for _, c := range stuck {
		need[c] = 1
	}
	for c, t := range s.parkedTeams() {
		stuck = append(stuck, c)
		need[c] = max(need[c], t.Team-s.poppers(c))
	}
	var short map[*Context]kindSet
	if stalled {
		short = s.shortContexts()
	}
	if len(stuck) == 0 && len(short) == 0 {
		return
	}
	s.cx.mu.Lock()
	var moved []int
	free := func(id int) bool {
		l := s.cx.target[id]
		return !slices.ContainsFunc(stuck, func(x *Context) bool { return l.isIn(x) }) && !slices.Contains(moved, id)
	}
	lend := func(c *Context, id int, why string) {
		moved = append(moved, s.retargetLocked([]int{id}, c, "close")...)
		if l := s.cfg.logger; l != nil {
			l.Warn(why, zap.String("context", c.name), zap.Int("worker", id))
		}
	}
	for _, c := range stuck {
		for id := range s.cx.target {
			if need[c] <= 0 {
				break
			}
			if free(id) {
				lend(c, id, "context has tasks and too few workers at Close: lending it a worker")
				need[c]--
			}
		}
	}
	for c, lack := range short {
		for id := range s.cx.target {
			if k := s.workers[id].info.Kind; lack.has(k) && free(id) && !s.cx.target[id].isIn(c) {
				lend(c, id, "context has tasks and no worker of a kind at Close: lending it one")
				lack &^= 1 << k
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
		before := s.inflight.n.Load()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := s.inflight.wait(ctx)
		cancel()
		if err == nil {
			return
		}
		s.lendAtClose(s.inflight.n.Load() == before)
	}
}

// shortContexts returns the live contexts with tasks of their own whose
// workers lack a kind that the scheduler has, with the kinds they lack:
// a task queued there may be one that none of them can run (its context
// lost the workers that could after it was queued).
func (s *Scheduler) shortContexts() map[*Context]kindSet {
	var all kindSet
	for k := range numKinds {
		if s.kinds[k] > 0 {
			all |= 1 << k
		}
	}
	s.cx.mu.Lock()
	defer s.cx.mu.Unlock()
	out := make(map[*Context]kindSet)
	for _, c := range s.cx.all {
		k := kindSet(c.kinds.Load())
		if hasOwnTasks(c) && k != 0 && all&^k != 0 {
			out[c] = all &^ k
		}
	}
	return out
}

// programMove reports whether a resize's reason is a call of the
// program's own (Resize.Reason).
func programMove(reason string) bool {
	switch reason {
	case "add", "remove", "move":
		return true
	}
	return false
}
