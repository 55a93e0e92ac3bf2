package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// Parallel tasks (WithTeam) are run by a team of workers that gather
// first. One team forms at a time in the whole scheduler, so two
// half-formed teams can never wait on each other for workers; the
// others wait in teams.queue. A team can only form from the workers that
// pop its context's tasks: when its context has fewer than the team's
// size (it shrank after the task was submitted), the team does not hold
// up the others: the task is parked, its waiting members are let go,
// and it is queued again when workers join the context. Until then
// WaitAll with a deadline names it (ErrNoWorkers), and Close lends the
// context the workers it needs.
//
// Whether a context has enough workers for a team is decided under mu
// on both sides: promoteTeamLocked reads the context's workers (applied)
// and then forms or parks the team; a worker that leaves or joins a
// context stores applied first and then takes mu (teamShrunk,
// teamsGrew). So either the decision saw the new workers, or the worker
// that changed them sees the team formed or parked and disbands or
// requeues it. Neither side may skip the lock on a lock-free look at
// forming or nparked: that look can come between the decision and its
// store, and the team then forms with too few workers (its members
// wait for ever, every other team queues behind it, Close waits on it)
// or stays parked with enough.
type teams struct {
	mu      sync.Mutex
	forming atomic.Pointer[team] // the team gathering now, nil for none
	queue   []*Task              // waiting to form, in order
	parked  []*Task              // waiting for their context to grow
	nparked atomic.Int32
}

// team is a parallel task gathering its workers.
type team struct {
	t    *Task
	size int
	// Guarded by teams.mu until start is closed, immutable after.
	members []*worker
	started bool
	aborted bool
	start   chan struct{} // closed when every member joined, or aborted
	end     chan struct{} // closed when rank 0 finished (fork-join)
	left    atomic.Int32
	mu      sync.Mutex
	errs    []error // by rank, made at the first failure
}

// startTeam queues a parallel task for its team to form.
func (s *Scheduler) startTeam(t *Task) {
	s.teams.mu.Lock()
	defer s.teams.mu.Unlock()
	s.teams.queue = append(s.teams.queue, t)
	if s.teams.forming.Load() == nil {
		s.promoteTeamLocked()
	}
}

// poppers returns how many workers pop the tasks of c now (nil: the
// global context).
func (s *Scheduler) poppers(c *Context) int {
	if c == nil || c.parent == nil {
		return len(s.workers) - int(s.cx.ngone.Load()) // every worker but the retired
	}
	return len(*c.applied.Load())
}

// promoteTeamLocked starts forming the next queued team whose context
// has enough workers, parking those that do not. teams.mu is held.
func (s *Scheduler) promoteTeamLocked() {
	for len(s.teams.queue) > 0 {
		t := s.teams.queue[0]
		s.teams.queue = s.teams.queue[1:]
		if s.poppers(t.Context) < t.Team {
			s.teamHook("park")
			s.parkTeamLocked(t)
			continue
		}
		s.teamHook("form")
		s.teams.forming.Store(&team{t: t, size: t.Team, start: make(chan struct{}), end: make(chan struct{})})
		s.wakeAll()
		return
	}
	s.teams.forming.Store(nil)
}

func (s *Scheduler) parkTeamLocked(t *Task) {
	s.teams.parked = append(s.teams.parked, t)
	s.teams.nparked.Add(1)
}

// teamShrunk is called when a worker stopped popping from c (after c's
// applied workers were updated): if the team forming belongs to c and c
// no longer has enough workers for it, the team is disbanded (its task
// parked) and the next one forms. It always takes teams.mu (see teams):
// a team being promoted now, from c's workers as they were, is formed
// when it gets the lock.
func (s *Scheduler) teamShrunk(c *Context) {
	s.teamHook("shrink")
	s.teams.mu.Lock()
	defer s.teams.mu.Unlock()
	tm := s.teams.forming.Load()
	if tm == nil || tm.t.Context != c || tm.started || s.poppers(c) >= tm.size {
		return
	}
	tm.aborted = true
	close(tm.start)
	s.parkTeamLocked(tm.t)
	s.promoteTeamLocked()
}

// teamsGrew is called when a worker started popping from new contexts
// (after their applied workers were updated): the parked teams that now
// have enough workers are queued again. It always takes teams.mu (see
// teams): a team being parked now, from the workers as they were, is
// parked when it gets the lock.
func (s *Scheduler) teamsGrew() {
	s.teamHook("grow")
	s.teams.mu.Lock()
	defer s.teams.mu.Unlock()
	n := 0
	for _, t := range s.teams.parked {
		if s.poppers(t.Context) >= t.Team {
			s.teams.queue = append(s.teams.queue, t)
			continue
		}
		s.teams.parked[n] = t
		n++
	}
	clear(s.teams.parked[n:])
	s.teams.parked = s.teams.parked[:n]
	s.teams.nparked.Store(int32(n))
	if s.teams.forming.Load() == nil {
		s.promoteTeamLocked()
	}
}

// teamHook calls the test hook (an internal test's option) at a point
// of team formation: "form" and "park" under teams.mu, as a team is
// formed or parked; "shrink" and "grow" before teamShrunk and teamsGrew
// take it.
func (s *Scheduler) teamHook(at string) {
	if h := s.cfg.teamHook; h != nil {
		h(at)
	}
}

// parkedTeams returns, per context, the largest team parked for lack of
// workers.
func (s *Scheduler) parkedTeams() map[*Context]*Task {
	if s.teams.nparked.Load() == 0 {
		return nil
	}
	s.teams.mu.Lock()
	defer s.teams.mu.Unlock()
	out := make(map[*Context]*Task)
	for _, t := range s.teams.parked {
		if o := out[t.Context]; o == nil || o.Team < t.Team {
			out[t.Context] = t
		}
	}
	return out
}

// joinTeam makes w a member of the forming team tm (if it is not full),
// waits for the others and runs its share; it reports whether it did. A
// member waiting for the others stays reachable: a context change posted
// for it, or the team being disbanded, lets it go before the team
// starts.
func (w *worker) joinTeam(tm *team) bool {
	s := w.s
	s.teams.mu.Lock()
	if s.teams.forming.Load() != tm || tm.started || tm.aborted || len(tm.members) >= tm.size {
		s.teams.mu.Unlock()
		return false
	}
	tm.members = append(tm.members, w)
	if len(tm.members) == tm.size {
		tm.started = true
		s.promoteTeamLocked()
		close(tm.start)
		s.teams.mu.Unlock()
	} else {
		s.teams.mu.Unlock()
		if !w.awaitTeam(tm) {
			return false
		}
	}
	w.runTeam(tm, slices.Index(tm.members, w))
	return true
}

// awaitTeam waits until tm starts (true) or w leaves it (false): because
// the team was disbanded, or a context change is posted for w (wakeMoved
// nudges it), or the scheduler stops. The member is not flagged as
// sleeping: a push must wake a worker that can take the task.
func (w *worker) awaitTeam(tm *team) bool {
	s := w.s
	for {
		if !w.cx.moveReq.Load() && !s.stopping.Load() {
			select {
			case <-tm.start:
			case <-w.wake:
			case <-s.stop:
			}
		}
		s.teams.mu.Lock()
		switch {
		case tm.started:
			s.teams.mu.Unlock()
			return true
		case tm.aborted:
			s.teams.mu.Unlock()
			return false
		case w.cx.moveReq.Load() || s.stopping.Load():
			tm.members = slices.DeleteFunc(tm.members, func(x *worker) bool { return x == w })
			s.teams.mu.Unlock()
			return false
		}
		s.teams.mu.Unlock()
	}
}

// runTeam runs member rank's share of the team's task; the last member
// to finish completes the task.
func (w *worker) runTeam(tm *team, rank int) {
	t := tm.t
	c := Call{Task: t, Worker: w.info.ID, Rank: rank, Size: tm.size, Arg: t.Arg}
	bufs, err := w.prepare(t, nil)
	c.bufs = bufs
	if err == nil {
		if t.Codelet.Parallel == SPMD || rank == 0 {
			err = w.run(t, &c)
		}
		if d := w.s.data; d != nil {
			d.releaseTask(t, w.info.Node, err != nil)
		}
		w.releaseScratch(w.scratchSet())
	}
	if t.Codelet.Parallel == ForkJoin {
		if rank == 0 {
			close(tm.end)
		} else {
			<-tm.end
		}
	}
	if err != nil {
		tm.mu.Lock()
		if tm.errs == nil {
			tm.errs = make([]error, tm.size)
		}
		tm.errs[rank] = err
		tm.mu.Unlock()
	}
	if tm.left.Add(1) == int32(tm.size) {
		// Every member's failure, in rank order.
		tm.mu.Lock()
		err := errors.Join(tm.errs...)
		tm.mu.Unlock()
		w.complete(t, err, false)
		w.release(t)
	}
}

// teamNeedError describes a parked team for ErrNoWorkers: the context
// has have workers, fewer than the team task needs.
func teamNeedError(c *Context, t *Task, have int) error {
	advice := "give it workers (AddWorkers, MoveWorkers)"
	switch {
	case c.parent == nil:
		advice = "the scheduler has no more workers: a driven worker left it (see the Driver's Deinit); Close cancels the task"
	case c.state.load() == ctxDeleting:
		advice = giveWhileDeleting
	}
	return fmt.Errorf("%w: %q has %s, its team task %q needs %d; %s", ErrNoWorkers, c.name, workersN(have), t.Codelet.name(), t.Team, advice)
}

// workersN is "1 worker" or "N workers".
func workersN(n int) string {
	if n == 1 {
		return "1 worker"
	}
	return fmt.Sprintf("%d workers", n)
}

// cpuWorkersN is "1 CPU worker" or "N CPU workers".
func cpuWorkersN(n int) string {
	if n == 1 {
		return "1 CPU worker"
	}
	return fmt.Sprintf("%d CPU workers", n)
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
