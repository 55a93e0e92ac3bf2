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

	"github.com/pzgo/pz/internal/latest"
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
	n      atomic.Int32 // live contexts other than global: 0 keeps hot paths free
	mon    atomic.Pointer[monitorBox]
	mu     sync.Mutex
	global *Context   // set by New, immutable
	all    []*Context // live contexts, global first
	nextID int
	target []*Context // by worker id: the innermost context it is in or moving to
	// retired is the target of the driven workers that left the
	// scheduler (retire): a context in no tree, so that no context
	// counts them among its workers.
	retired *Context
	// ngone counts the retired workers; 0 keeps Submit's check of them
	// to one load.
	ngone  atomic.Int32
	reason []string // by worker id: why it was last moved
	// resizes is the log Resizes returns. Unless the scheduler records
	// (WithStats, WithTrace: it then keeps every task's event anyway),
	// it keeps the latest resizeLog moves: a long program that moves
	// workers for hours, or creates and deletes a context per phase,
	// would otherwise grow by a Resize (about 100 bytes) per move.
	resizes latest.Log[Resize]
}

// resizeLog is how many of the latest resizes a scheduler that does not
// record keeps for Resizes.
const resizeLog = 4096

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
	s.cx.retired = &Context{s: s, id: -1, name: "(left the scheduler)", gone: make(chan struct{})}
	s.cx.retired.applied.Store(&[]int{})
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
		if l == s.cx.retired {
			return retiredError(id)
		}
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
		if s.cx.target[id] == s.cx.retired {
			return retiredError(id)
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
// With the watchdog on, a wait on every task also names the tasks the
// workers run, what the other tasks may be waiting for.
func (s *Scheduler) stuckErrorIn(scope *Context, err error) error {
	errs := append([]error{err}, s.stuckCauses(scope)...)
	if run, ok := s.Running(); ok && scope == nil && len(run) > 0 {
		errs = append(errs, fmt.Errorf("scheduler: running: %s", runningList(run)))
	}
	return errors.Join(errs...)
}

// stuckCauses says what the scheduler knows keeps tasks of context
// scope (nil: every task) from running: waits for a tag no task carries
// or a task never submitted, driven workers that nothing drives,
// contexts holding tasks and no workers, team tasks short of workers.
// It is empty when nothing is known to be stuck.
func (s *Scheduler) stuckCauses(scope *Context) []error {
	errs := s.stuckWaits(scope)
	for _, note := range s.undrivenNotes() {
		errs = append(errs, fmt.Errorf("%w: %s", ErrDriver, note))
	}
	if s.cx.n.Load() == 0 && s.cx.ngone.Load() == 0 {
		return errs
	}
	for _, c := range s.stuckContexts() {
		if scope != nil && !c.isIn(scope) {
			continue
		}
		advice := "give it workers (AddWorkers, MoveWorkers) or submit elsewhere"
		if c.state.load() == ctxDeleting {
			advice = giveWhileDeleting
		}
		errs = append(errs, fmt.Errorf("%w: %q has %s pending and no workers; %s", ErrNoWorkers, c.name, tasks(c.Pending()), advice))
	}
	for c, t := range s.parkedTeams() {
		if scope != nil && !c.isIn(scope) {
			continue
		}
		errs = append(errs, teamNeedError(c, t, s.poppers(c)))
	}
	return errs
}

// undrivenNotes says, for each driven worker (WithDrivenWorkers) that
// runs no task now, why: nothing has driven it yet, Close went on
// without it, or its driver ended and it left the scheduler.
func (s *Scheduler) undrivenNotes() []string {
	var out []string
	for _, w := range s.workers {
		if !w.driven {
			continue
		}
		id := w.info.ID
		switch w.dstate.Load() {
		case driverNew:
			if !w.taken.Load() {
				out = append(out, fmt.Sprintf("worker %d is left to the program (WithDrivenWorkers) and nothing drives it: the tasks the policy gives it wait for Driver(%d).Run, or Init and RunOnce", id, id))
			} else {
				out = append(out, fmt.Sprintf("worker %d is driven by the application (WithDrivenWorkers) and has not run (call its Driver's Run or RunOnce)", id))
			}
		case driverDropped:
			out = append(out, fmt.Sprintf("worker %d is driven by the application (WithDrivenWorkers) and had not run when Close went on without it", id))
		case driverDone:
			if w.retired.Load() {
				out = append(out, fmt.Sprintf("worker %d was driven by the application (WithDrivenWorkers) and its driver ended (Run returned, or Deinit): it left the scheduler", id))
			}
		}
	}
	return out
}

// retiredError refuses a worker that left the scheduler.
func retiredError(id int) error {
	return fmt.Errorf("%w: worker %d left the scheduler: it was driven by the application and its driver ended (Run returned, or Deinit), or Close went on without it", ErrBadWorker, id)
}

// retire makes w, a driven worker whose driver ended (or that Close
// gave up on, never driven), leave the scheduler, as a StarPU worker
// whose not-launched driver deinitializes leaves the worker set: it
// leaves every context and its policy, the tasks queued for it alone go
// back to its contexts' other workers, and no context counts it any
// more (Workers, MinWorkers' teams, Submit's team check). It runs on
// the goroutine that owns w (its driver's, or Close's for a worker
// nothing drove), which is at a safe point: w is in no Pop and no team.
// Once the workers stop (Close's end) there is nothing to hand over.
func (s *Scheduler) retire(w *worker) {
	if s.stopping.Load() || w.retired.Load() {
		return
	}
	s.cx.mu.Lock()
	w.retired.Store(true)
	s.cx.ngone.Add(1)
	id := w.info.ID
	l := s.cx.target[id]
	s.cx.target[id] = s.cx.retired
	s.cx.reason[id] = "retired"
	if l.cluster {
		s.electLocked(l)
	}
	s.recountKindsLocked()
	s.cx.mu.Unlock()
	w.cx.moveReq.Store(false)
	old := *w.cx.chain.Load()
	none := []*Context{}
	w.cx.chain.Store(&none) // popsFrom is false from now on
	for _, c := range old {
		c.leave(w)
	}
	if l := s.cfg.logger; l != nil {
		l.Debug("driven worker left the scheduler: its driver ended, or Close went on without it",
			zap.Int("worker", id), zap.String("context", old[0].name))
	}
	if s.live(true) == 0 {
		// The last worker left (every worker driven, every driver
		// ended): nothing queued can run any more, and no worker can
		// come. Cancel it now, as Close would, so that WaitAll (and a
		// layer's Close that waits as WaitAll does, scheduler/dist's)
		// returns the cancellations instead of waiting for ever.
		s.reap(func(t *Task, cause error) error {
			return &canceledError{name: t.Codelet.name(), cause: s.withDriverNotes(cause), noWorker: true}
		})
	}
}

// live returns the workers that run tasks or may still: the scheduler's
// own and the driven ones not retired; with undriven, also those whose
// driver was never initialized.
func (s *Scheduler) live(undriven bool) int {
	n := 0
	for _, w := range s.workers {
		if !w.driven || w.dstate.Load() == driverInit || undriven && w.dstate.Load() == driverNew {
			n++
		}
	}
	return n
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
	s.cx.resizes.Append(r)
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

// lendAtClose gives the contexts that still hold tasks and lack workers
// for them the workers they lack, so that Close completes every task: a
// context with tasks and no workers one worker, a context whose team
// task is parked for lack of CPU workers as many as the team lacks.
// They come first from the workers free of such contexts, lowest ids
// first. When a context cannot be served that way (every worker sits in
// a context that lacks workers too, as when two contexts of one worker
// each wait for teams of two), the first such context whose needs the
// workers of the others can meet takes them, one context at a time: its
// tasks run, and then its workers are free for the next. When no task
// completed since the last look (stalled), it also lends each context
// that holds tasks and lacks a kind of worker one worker of each kind it
// lacks: a task queued there that none of its workers can run then
// runs. It is logged and recorded as a "close" resize. Workers that run
// nothing (a driven worker not driven, or retired) are never lent, nor
// counted among a context's.
func (s *Scheduler) lendAtClose(stalled bool) {
	type want struct {
		c    *Context
		n    int  // workers it lacks
		cpu  bool // CPU workers (a team)
		team *Task
	}
	var wants []*want
	for _, c := range s.stuckContexts() {
		wants = append(wants, &want{c: c, n: 1})
	}
	teams := s.parkedTeams()
	var short map[*Context]kindSet
	if stalled {
		short = s.shortContexts()
	}
	if len(wants) == 0 && len(teams) == 0 && len(short) == 0 {
		return
	}
	s.cx.mu.Lock()
	runs := func(id int) bool {
		w := s.workers[id]
		return s.cx.target[id] != s.cx.retired && (!w.driven || w.dstate.Load() == driverInit)
	}
	for c, t := range teams {
		if c.parent == nil {
			continue // every worker pops the global context's tasks: none to lend
		}
		have := 0
		for id, l := range s.cx.target {
			if l.isIn(c) && runs(id) && s.workers[id].info.Kind == CPUWorker {
				have++
			}
		}
		wants = append(wants, &want{c: c, n: t.Team - have, cpu: true, team: t})
	}
	slices.SortStableFunc(wants, func(a, b *want) int { return a.c.id - b.c.id })
	inWant := func(id int) *want {
		l := s.cx.target[id]
		for _, x := range wants {
			if l.isIn(x.c) {
				return x
			}
		}
		return nil
	}
	var moved []int
	fits := func(x *want, id int) bool {
		return runs(id) && !slices.Contains(moved, id) && !s.cx.target[id].isIn(x.c) &&
			(!x.cpu || s.workers[id].info.Kind == CPUWorker)
	}
	lend := func(x *want, id int, why string) {
		moved = append(moved, s.retargetLocked([]int{id}, x.c, "close")...)
		x.n--
		if l := s.cfg.logger; l != nil {
			l.Warn(why, zap.String("context", x.c.name), zap.Int("worker", id))
		}
	}
	const why = "context has tasks and too few workers at Close: lending it a worker"
	served := false // a context had its needs met, its workers arriving
	for _, x := range wants {
		if x.n <= 0 {
			served = true
			continue
		}
		for id := range s.cx.target {
			if x.n > 0 && fits(x, id) && inWant(id) == nil {
				lend(x, id, why)
			}
		}
	}
	if !served && len(moved) == 0 {
		// Every worker that could help sits in a context that lacks
		// workers too: serve the first context whose needs the others'
		// workers meet, and leave the others waiting for it.
		for _, x := range wants {
			if x.n <= 0 {
				continue
			}
			var ids []int
			for id := range s.cx.target {
				if o := inWant(id); o != nil && o != x && o.n > 0 && fits(x, id) && len(ids) < x.n {
					ids = append(ids, id)
				}
			}
			if len(ids) < x.n {
				continue
			}
			for _, id := range ids {
				lend(x, id, "context has tasks and too few workers at Close, and every worker waits in such a context: lending it another's")
			}
			break
		}
	}
	for c, lack := range short {
		for id := range s.cx.target {
			if k := s.workers[id].info.Kind; lack.has(k) && runs(id) && !slices.Contains(moved, id) && inWant(id) == nil && !s.cx.target[id].isIn(c) {
				moved = append(moved, s.retargetLocked([]int{id}, c, "close")...)
				if l := s.cfg.logger; l != nil {
					l.Warn("context has tasks and no worker of a kind at Close: lending it one", zap.String("context", c.name), zap.Int("worker", id))
				}
				lack &^= 1 << k
			}
		}
	}
	s.cx.mu.Unlock()
	s.wakeMoved(moved)
}

// undrivenGrace is how long Close waits, with no task completing, for
// a driven worker whose driver was never initialized before it goes on
// without it (dropUndriven): a program may call Close from a goroutine
// of its own before the one that drives the worker reaches Run.
const undrivenGrace = time.Second

// drainContexts waits for every task before Close stops the workers,
// lending workers to contexts that have none. When no task completes
// any more it also cancels the tasks nothing can run: teams larger than
// the CPU workers left, and, once no worker is left at all, every task
// (reapAtClose); and after undrivenGrace it goes on without the driven
// workers nothing drove (dropUndriven).
func (s *Scheduler) drainContexts() {
	if s.cx.n.Load() == 0 && s.cfg.driven == 0 {
		return
	}
	progress := time.Now()
	for s.inflight.n.Load() != 0 {
		before := s.inflight.n.Load()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := s.inflight.wait(ctx)
		cancel()
		if err == nil {
			return
		}
		stalled := s.inflight.n.Load() == before
		if !stalled {
			progress = time.Now()
		}
		if stalled && time.Since(progress) >= undrivenGrace {
			s.dropUndriven()
		}
		if stalled {
			s.cancelHopelessTeams()
			if s.live(true) == 0 {
				s.reap(s.closeCancel)
			}
		}
		s.lendAtClose(stalled)
	}
}

// dropUndriven retires, at Close, the driven workers whose driver was
// never initialized: nothing may drive them before Close ends, and the
// tasks queued for them go to the other workers (or are canceled, with
// an error naming the worker, when none is left). Their Init fails from
// then on (Run returns nil).
func (s *Scheduler) dropUndriven() {
	for _, w := range s.workers {
		if w.driven && w.dstate.CompareAndSwap(driverNew, driverDropped) {
			s.retire(w) // Close's goroutine owns it now: it never ran
		}
	}
}

// closeCancel is the error of a task canceled at Close because nothing
// can run it: cause says why, and the undriven workers are named.
func (s *Scheduler) closeCancel(t *Task, cause error) error {
	return &canceledError{name: t.Codelet.name(), cause: s.withDriverNotes(cause), atClose: true}
}

// withDriverNotes adds to cause what undrivenNotes says of the driven
// workers.
func (s *Scheduler) withDriverNotes(cause error) error {
	if notes := s.undrivenNotes(); len(notes) > 0 {
		cause = fmt.Errorf("%w (%s)", cause, strings.Join(notes, "; "))
	}
	return cause
}

// cancelAtClose completes t, which nothing can run, with err without
// running it, from Close's goroutine, and releases its dependents.
func (s *Scheduler) cancelAtClose(t *Task, err error) {
	if s.data != nil {
		s.data.unwant(t)
	}
	var buf [8]*Task
	q := s.finish(t, err, nil, buf[:0])
	s.releaseBy(t, 1, nil)
	for _, n := range q {
		s.ready(n, nil)
	}
}

// cancelHopelessTeams cancels, at Close, the parked team tasks larger
// than the CPU workers left in the scheduler (driven workers retired):
// no lending can form them.
func (s *Scheduler) cancelHopelessTeams() {
	if s.teams.nparked.Load() == 0 {
		return
	}
	cpu := s.kinds[CPUWorker]
	for _, w := range s.workers {
		if w.info.Kind == CPUWorker && w.retired.Load() {
			cpu--
		}
	}
	s.teams.mu.Lock()
	var out []*Task
	n := 0
	for _, t := range s.teams.parked {
		if t.Team > cpu {
			out = append(out, t)
			continue
		}
		s.teams.parked[n] = t
		n++
	}
	clear(s.teams.parked[n:])
	s.teams.parked = s.teams.parked[:n]
	s.teams.nparked.Store(int32(n))
	s.teams.mu.Unlock()
	for _, t := range out {
		s.cancelAtClose(t, s.closeCancel(t, fmt.Errorf("%w: its team of %d workers cannot form: the scheduler has %s left", ErrBadTeam, t.Team, cpuWorkersN(cpu))))
	}
}

// reap cancels every task queued in a context's policy once no worker
// is left to run anything (every worker driven, and every driver ended
// or dropped), with the error cancel makes of its cause: when the last
// driver ends (retire), and at Close. It pops them as one of the
// retired workers, which nothing drives any more, from every context,
// and completes them with an error naming the workers. The dependents
// they release are queued, and canceled at the next call.
func (s *Scheduler) reap(cancel func(t *Task, cause error) error) {
	s.reapMu.Lock()
	defer s.reapMu.Unlock()
	var r *worker
	for _, w := range s.workers {
		if w.retired.Load() {
			r = w
			break
		}
	}
	if r == nil {
		return
	}
	s.cx.mu.Lock()
	all := slices.Clone(s.cx.all)
	s.cx.mu.Unlock()
	id := r.info.ID
	for _, c := range all {
		if cp, ok := c.policy.(*clusterPolicy); ok {
			cp.setMaster(id, r.info.Kind)
		} else {
			c.policy.AddWorkers(r.info)
		}
		for t := c.policy.Pop(id); t != nil; t = c.policy.Pop(id) {
			s.cancelAtClose(t, cancel(t, fmt.Errorf("%w: no worker is left to run it", ErrDriver)))
		}
		if _, ok := c.policy.(*clusterPolicy); !ok {
			for _, t := range c.policy.RemoveWorkers(id) {
				c.push(t, nil, false)
			}
		}
	}
	s.teams.mu.Lock()
	out := slices.Clone(s.teams.parked)
	clear(s.teams.parked)
	s.teams.parked = s.teams.parked[:0]
	s.teams.nparked.Store(0)
	s.teams.mu.Unlock()
	for _, t := range out {
		s.cancelAtClose(t, cancel(t, fmt.Errorf("%w: no worker is left to run it", ErrDriver)))
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
