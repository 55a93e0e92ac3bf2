package scheduler_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pzgo/pz/scheduler"
)

// The engine under review: submissions from several goroutines at once
// that the checks of one submission at a time must still catch.

// submitPair submits a and b from two goroutines released together and
// returns their submission errors.
func submitPair(ctx context.Context, s *scheduler.Scheduler, a, b *scheduler.Task) (error, error) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	var ea, eb error
	wg.Add(2)
	go func() { defer wg.Done(); <-start; ea = s.SubmitTask(ctx, a) }()
	go func() { defer wg.Done(); <-start; eb = s.SubmitTask(ctx, b) }()
	close(start)
	wg.Wait()
	return ea, eb
}

// checkPairEnds waits for the submitted tasks of a pair that would wait
// for each other: they must end (one of them refused or failed with
// ErrBadData, the other canceled), never hang.
func checkPairEnds(t *testing.T, what string, i int, ts []*scheduler.Task, errs []error) {
	t.Helper()
	bad := 0
	for k := range ts {
		if errs[k] != nil {
			if !errors.Is(errs[k], scheduler.ErrBadData) {
				t.Fatalf("%s %d: Submit: %v, want nil or ErrBadData", what, i, errs[k])
			}
			bad++
		}
	}
	if bad > 0 {
		// The other waits for a task never submitted, as it would
		// after the same calls made one after the other; Close ends it.
		return
	}
	for _, x := range ts {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := x.Wait(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s %d: the two tasks, submitted at once, wait for each other forever (submissions: %v, %v)", what, i, errs[0], errs[1])
		}
		if errors.Is(err, scheduler.ErrBadData) && !errors.Is(err, scheduler.ErrCanceled) {
			bad++
		}
	}
	if bad == 0 {
		t.Fatalf("%s %d: neither task of the cycle was refused (errors %v, %v; task errors %v, %v)", what, i, errs[0], errs[1], ts[0].Err(), ts[1].Err())
	}
}

// TestConcurrentTagCycle submits, from two goroutines at once, a task
// with tag a waiting for tag b and one with tag b waiting for tag a:
// submitted one after the other the second is refused (ErrBadData), and
// submitted at once they must not both pass the check and wait for
// each other forever.
func TestConcurrentTagCycle(t *testing.T) {
	ctx := testCtx(t)
	s := newSchedBounded(t, scheduler.WithWorkers(2))
	nop := &scheduler.Codelet{Name: "nop", CPU: func(*scheduler.Call) error { return nil }}
	for i := range 300 {
		ga, gb := scheduler.Tag(2*i+1), scheduler.Tag(2*i+2)
		a := scheduler.NewTask(nop, scheduler.WithTag(ga), scheduler.AfterTags(gb))
		b := scheduler.NewTask(nop, scheduler.WithTag(gb), scheduler.AfterTags(ga))
		ea, eb := submitPair(ctx, s, a, b)
		checkPairEnds(t, "tag cycle", i, []*scheduler.Task{a, b}, []error{ea, eb})
	}
	_ = closeWithin(t, s, 10*time.Second)
}

// TestConcurrentAfterCycle is TestConcurrentTagCycle with After: a waits
// for b and b for a, each submitted from its own goroutine at once.
func TestConcurrentAfterCycle(t *testing.T) {
	ctx := testCtx(t)
	s := newSchedBounded(t, scheduler.WithWorkers(2))
	nop := &scheduler.Codelet{Name: "nop", CPU: func(*scheduler.Call) error { return nil }}
	for i := range 300 {
		a := scheduler.NewTask(nop)
		b := scheduler.NewTask(nop, scheduler.After(a))
		a.After = []*scheduler.Task{b}
		ea, eb := submitPair(ctx, s, a, b)
		checkPairEnds(t, "After cycle", i, []*scheduler.Task{a, b}, []error{ea, eb})
	}
	_ = closeWithin(t, s, 10*time.Second)
}

// TestCloseRacingStuckWaits submits, while Close runs, tasks that wait
// for what only a later submission could end (a tag no task carries, a
// task never submitted): Close cancels those it finds, and a task wired
// just after it looked must not be left waiting, with Close waiting for
// it forever.
func TestCloseRacingStuckWaits(t *testing.T) {
	nop := &scheduler.Codelet{Name: "nop", CPU: func(*scheduler.Call) error { return nil }}
	for _, kind := range []string{"AfterTags", "After"} {
		t.Run(kind, func(t *testing.T) {
			for round := range 200 {
				s := newSchedBounded(t, scheduler.WithWorkers(1))
				ctx := testCtx(t)
				started := make(chan struct{})
				var tasks []*scheduler.Task
				done := make(chan struct{})
				go func() {
					defer close(done)
					for i := 1; ; i++ {
						var x *scheduler.Task
						if kind == "After" {
							x = scheduler.NewTask(nop, scheduler.After(scheduler.NewTask(nop)))
						} else {
							x = scheduler.NewTask(nop, scheduler.AfterTags(scheduler.Tag(i)))
						}
						if err := s.SubmitTask(ctx, x); err != nil {
							if !errors.Is(err, scheduler.ErrClosed) {
								t.Errorf("round %d: Submit: %v", round, err)
							}
							return
						}
						tasks = append(tasks, x)
						if i == 1 {
							close(started)
						}
					}
				}()
				<-started
				_ = closeWithin(t, s, 10*time.Second)
				<-done
				for i, x := range tasks {
					select {
					case <-x.Done():
					default:
						t.Fatalf("round %d: task %d of %d not done after Close", round, i, len(tasks))
					}
					if !errors.Is(x.Err(), scheduler.ErrNotSubmitted) {
						t.Fatalf("round %d: task %d: %v, want ErrNotSubmitted", round, i, x.Err())
					}
				}
			}
		})
	}
}
