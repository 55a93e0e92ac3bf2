package scheduler

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// withTeamHook installs f at the points of team formation that
// Scheduler.teamHook names.
func withTeamHook(f func(at string)) Option { return func(c *config) { c.teamHook = f } }

// teamRaceSched starts a scheduler of n workers with the team hook f
// (perf models off, no environment). Its cleanup's Close is bounded: a
// scheduler left with a team that never forms fails the test instead of
// hanging it.
func teamRaceSched(t *testing.T, n int, f func(at string)) *Scheduler {
	t.Helper()
	s, err := New(context.Background(), WithWorkers(n), WithPerfModelDir(""),
		WithGetenv(func(string) string { return "" }), withTeamHook(f))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		done := make(chan struct{})
		go func() { _ = s.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("cleanup: Close still blocked after 10s")
		}
	})
	return s
}

// hookGate holds a worker at one point of team formation (under
// teams.mu) until another worker reaches the point it races with (its
// hook, before it takes teams.mu) or has applied its context change
// without reaching it (the Resize is recorded).
type hookGate struct {
	armed   atomic.Bool
	holding atomic.Bool   // a worker is held at the point
	at      string        // the point held: "form" or "park"
	other   string        // the racing point: "shrink" or "grow"
	held    chan struct{} // closed when a worker is held at the point
	reached chan struct{} // closed when a worker reached the racing point
	once    sync.Once
	s       atomic.Pointer[Scheduler]
	worker  atomic.Int32 // the racing worker, and its Resize's reason
	reason  string
	from    atomic.Int32 // Resizes recorded before the gate was armed
}

// arm makes the gate hold the next worker that reaches its point, until
// worker has reached the racing point or applied a change for reason.
func (g *hookGate) arm(s *Scheduler, worker int) {
	g.worker.Store(int32(worker))
	g.from.Store(int32(len(s.Resizes())))
	g.s.Store(s)
	g.armed.Store(true)
}

func newHookGate(at, other, reason string) *hookGate {
	return &hookGate{at: at, other: other, reason: reason, held: make(chan struct{}), reached: make(chan struct{})}
}

func (g *hookGate) hook(at string) {
	switch {
	case at == g.other && g.holding.Load():
		g.once.Do(func() { close(g.reached) })
	case at == g.at && g.armed.CompareAndSwap(true, false):
		g.holding.Store(true)
		close(g.held)
		g.wait()
		g.holding.Store(false)
	}
}

// wait returns once the racing worker reached its hook or recorded its
// Resize (10 s at most, then the test's checks fail).
func (g *hookGate) wait() {
	s := g.s.Load()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-g.reached:
			return
		default:
		}
		if slices.ContainsFunc(s.Resizes()[g.from.Load():], func(r Resize) bool {
			return r.Worker == int(g.worker.Load()) && r.Reason == g.reason
		}) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// waitApplied waits until worker has applied a context change made for
// reason (its Resize is recorded).
func waitApplied(t *testing.T, s *Scheduler, worker int, reason string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if slices.ContainsFunc(s.Resizes(), func(r Resize) bool { return r.Worker == worker && r.Reason == reason }) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("worker %d did not apply its %q context change", worker, reason)
}

// TestTeamFormsAsItsContextShrinks: a team of 2 in a 2-worker context is
// promoted (its context's workers counted: 2) while the other worker
// leaves the context. teamShrunk looked at the team forming without the
// lock and saw none (the promotion had counted, not yet stored), so the
// team formed with one worker: its member waited for ever, the team of
// another context queued behind it, and Close waited in drainContexts
// (TestTeamAfterContextShrinks/runner, once in a full run under load).
// The gate holds the promotion until the leaving worker has either
// reached teamShrunk's lock or finished leaving: the team must end up
// parked (ErrNoWorkers), the other context's team must run, and adding
// the worker back runs it.
func TestTeamFormsAsItsContextShrinks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g := newHookGate("form", "shrink", "remove")
	s := teamRaceSched(t, 4, g.hook)
	c1, err := s.NewContext("c1", ContextWorkers(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	c2, err := s.NewContext("c2", ContextWorkers(2, 3))
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan int, 1), make(chan struct{})
	block := &Codelet{Name: "block", CPU: func(c *Call) error {
		started <- c.Worker
		<-release
		return nil
	}}
	var members atomic.Int32
	spmd := &Codelet{Name: "spmd", Parallel: SPMD, CPU: func(*Call) error {
		members.Add(1)
		return nil
	}}
	if err := s.Submit(ctx, block, InContext(c1)); err != nil {
		t.Fatal(err)
	}
	runner := <-started
	g.arm(s, runner)
	team := NewTask(spmd, WithTeam(2), InContext(c1))
	if err := s.SubmitTask(ctx, team); err != nil {
		t.Fatal(err)
	}
	<-g.held // the other worker promotes the team, c1's workers counted
	if err := c1.RemoveWorkers(runner); err != nil {
		t.Fatal(err)
	}
	close(release) // the runner leaves c1 while the promotion is held

	other := NewTask(spmd, WithTeam(2), InContext(c2))
	if err := s.SubmitTask(ctx, other); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
	err = other.Wait(short)
	cancelShort()
	if err != nil {
		t.Fatalf("the team of c2 is held up by c1's: %v", err)
	}
	short, cancelShort = context.WithTimeout(ctx, 200*time.Millisecond)
	err = c1.WaitAll(short)
	cancelShort()
	if !errors.Is(err, ErrNoWorkers) {
		t.Fatalf("c1.WaitAll = %v, want ErrNoWorkers (its team parked)", err)
	}
	if err := c1.AddWorkers(runner); err != nil {
		t.Fatal(err)
	}
	if err := c1.WaitAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := members.Load(); got != 4 {
		t.Fatalf("%d members ran, want 4 (two teams of two)", got)
	}
}

// TestTeamFormsAsItsContextGrows: a team of 2, submitted to a 2-worker
// context that then lost a worker, is parked (its context's workers
// counted: 1) while the worker joins the context again. teamsGrew
// looked at the parked count without the lock and saw none (the park
// had counted, not yet stored), so the team stayed parked with two
// workers in its context: WaitAll said "has 2 workers, its team task
// needs 2" and Close, finding nothing to lend, waited for ever. The
// gate holds the park until the joining worker has either reached
// teamsGrew's lock or finished joining: the team must run.
func TestTeamFormsAsItsContextGrows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g := newHookGate("park", "grow", "add")
	s := teamRaceSched(t, 2, g.hook)
	c1, err := s.NewContext("c1", ContextWorkers(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan int, 2)
	release := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	block := &Codelet{Name: "block", CPU: func(c *Call) error {
		started <- c.Worker
		<-release[c.Worker]
		return nil
	}}
	var members atomic.Int32
	spmd := &Codelet{Name: "spmd", Parallel: SPMD, CPU: func(*Call) error {
		members.Add(1)
		return nil
	}}
	for range 2 { // one on each worker: the team task waits in c1's queue
		if err := s.Submit(ctx, block, InContext(c1)); err != nil {
			t.Fatal(err)
		}
		<-started
	}
	if err := s.Submit(ctx, spmd, WithTeam(2), InContext(c1)); err != nil {
		t.Fatal(err)
	}
	if err := c1.RemoveWorkers(1); err != nil {
		t.Fatal(err)
	}
	close(release[1])
	waitApplied(t, s, 1, "remove") // c1 has worker 0 alone
	g.arm(s, 1)
	close(release[0])
	<-g.held // worker 0 pops the team task and parks it, c1's workers counted
	if err := c1.AddWorkers(1); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
	err = c1.WaitAll(short)
	cancelShort()
	if err != nil {
		t.Fatalf("the team did not form with two workers in its context: %v", err)
	}
	if got := members.Load(); got != 2 {
		t.Fatalf("%d members ran, want 2", got)
	}
}
