package scheduler_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestTeamAfterContextShrinks: a blocking task and then a team of 2 in a
// 2-worker context; one worker (the one running the blocking task, or
// the one waiting for its team mate) is removed, then the blocking task
// is released. The team cannot form: WaitAll with a deadline says so
// (ErrNoWorkers naming the context and the team), teams of other
// contexts still run, adding a worker back runs it, and Close ends.
func TestTeamAfterContextShrinks(t *testing.T) {
	for _, remove := range []string{"runner", "waiter"} {
		t.Run(remove, func(t *testing.T) {
			ctx := testCtx(t)
			s := newSched(t, scheduler.WithWorkers(4))
			c1, err := s.NewContext("c1", scheduler.ContextWorkers(0, 1))
			require.NoError(t, err)
			c2, err := s.NewContext("c2", scheduler.ContextWorkers(2, 3))
			require.NoError(t, err)
			mon := &eventMonitor{popName: "spmd", popped: make(chan int, 1)}
			s.SetMonitor(mon, 0)

			started, release := make(chan int, 1), make(chan struct{})
			block := &scheduler.Codelet{Name: "block", CPU: func(c *scheduler.Call) error {
				started <- c.Worker
				<-release
				return nil
			}}
			var members atomic.Int32
			spmd := &scheduler.Codelet{Name: "spmd", Parallel: scheduler.SPMD, CPU: func(*scheduler.Call) error {
				members.Add(1)
				return nil
			}}
			require.NoError(t, s.Submit(ctx, block, scheduler.InContext(c1)))
			runner := <-started
			team := scheduler.NewTask(spmd, scheduler.WithTeam(2), scheduler.InContext(c1))
			require.NoError(t, s.SubmitTask(ctx, team))
			assert.Equal(t, 2, c1.MinWorkers(), "the team needs two workers")
			waiter := <-mon.popped // the other worker took the team task and waits for a mate
			require.Equal(t, 1-runner, waiter)
			gone := runner
			if remove == "waiter" {
				gone = waiter
			}
			require.NoError(t, c1.RemoveWorkers(gone))
			if remove == "waiter" {
				// The waiting member leaves at once (the runner only
				// after its task): wait until it has, or the runner
				// could complete the team with it first.
				waitResize(t, s, gone, "remove")
			}
			close(release)

			// A team of another context is not held up.
			other := scheduler.NewTask(spmd, scheduler.WithTeam(2), scheduler.InContext(c2))
			require.NoError(t, s.SubmitTask(ctx, other))
			require.NoError(t, other.Wait(ctx))

			short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			err = c1.WaitAll(short)
			cancel()
			require.ErrorIs(t, err, scheduler.ErrNoWorkers)
			assert.Contains(t, err.Error(), `"c1"`)
			assert.Contains(t, err.Error(), `"c1" has 1 worker, its team task "spmd" needs 2`)
			assert.Contains(t, err.Error(), `"spmd"`)

			// Workers back: the team forms.
			require.NoError(t, c1.AddWorkers(gone))
			require.NoError(t, c1.WaitAll(ctx))
			require.NoError(t, team.Err())
			assert.Equal(t, 0, c1.MinWorkers())
			assert.Equal(t, int32(4), members.Load(), "two members for each of the two teams")
		})
	}
}

// TestCloseWithStalledTeam: Close completes a team whose context lost
// the workers it needs, lending it workers.
func TestCloseWithStalledTeam(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(3), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	c, err := s.NewContext("c", scheduler.ContextWorkers(0, 1))
	require.NoError(t, err)
	var members atomic.Int32
	spmd := &scheduler.Codelet{Name: "spmd", Parallel: scheduler.SPMD, CPU: func(*scheduler.Call) error {
		members.Add(1)
		return nil
	}}
	started, release := make(chan struct{}), make(chan struct{})
	block := &scheduler.Codelet{Name: "block", CPU: func(*scheduler.Call) error {
		close(started)
		<-release
		return nil
	}}
	require.NoError(t, s.Submit(ctx, block, scheduler.InContext(c)))
	<-started
	require.NoError(t, s.Submit(ctx, spmd, scheduler.WithTeam(2), scheduler.InContext(c)))
	require.NoError(t, c.RemoveWorkers(0, 1))
	close(release)
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("Close hung on a team whose context has no workers")
	}
	assert.Equal(t, int32(2), members.Load())
}

// TestTeamsAfterWakeups: teams formed again and again while other tasks
// are pushed. A worker that joined a team from its last look before
// sleeping, and was woken (for a push) while it waited for its team
// mate, must not then sleep where no push can wake it: the next team
// would wait for it forever. Each round's WaitAll has a deadline, so a
// lost worker fails the test instead of hanging it.
func TestTeamsAfterWakeups(t *testing.T) {
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	h, err := s.RegisterVector(make([]float64, 2))
	require.NoError(t, err)
	var shares, plain atomic.Int64
	spmd := &scheduler.Codelet{Name: "spmd", Parallel: scheduler.SPMD, CPU: func(c *scheduler.Call) error {
		scheduler.VectorOf[float64](c, 0)[c.Rank]++
		shares.Add(1)
		return nil
	}}
	small := &scheduler.Codelet{Name: "small", CPU: func(*scheduler.Call) error {
		plain.Add(1)
		return nil
	}}
	const rounds, teams = 500, 20
	wantPlain := 0
	for r := range rounds {
		for i := range teams {
			require.NoError(t, s.Submit(ctx, spmd, scheduler.RW(h), scheduler.WithTeam(2)))
			for range (r + i) % 3 {
				require.NoError(t, s.Submit(ctx, small, scheduler.R(h)))
				wantPlain++
			}
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.WaitAll(wctx)
		cancel()
		if err != nil {
			// Close would wait for the stuck team: leave the scheduler.
			t.Fatalf("round %d: %v", r, err)
		}
	}
	require.NoError(t, s.Close())
	require.Equal(t, int64(2*rounds*teams), shares.Load())
	require.Equal(t, int64(wantPlain), plain.Load())
}

// TestTeamMembersFailures: every failing member of an SPMD team is
// reported, in rank order, each naming its rank; the task's TaskError is
// the lowest rank's.
func TestTeamMembersFailures(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(4))
	cl := &scheduler.Codelet{Name: "spmd", Parallel: scheduler.SPMD, CPU: func(c *scheduler.Call) error {
		switch c.Rank {
		case 1:
			return errors.New("bad input")
		case 3:
			panic("index out of range")
		}
		return nil
	}}
	task := scheduler.NewTask(cl, scheduler.WithTeam(4))
	require.NoError(t, s.SubmitTask(ctx, task))
	err := s.WaitAll(ctx)
	require.Error(t, err)
	msg := err.Error()
	i1 := strings.Index(msg, `codelet "spmd" failed on worker`)
	i3 := strings.Index(msg, `codelet "spmd" panicked on worker`)
	require.True(t, i1 >= 0 && i3 > i1, "both members, rank order: %s", msg)
	assert.Contains(t, msg[i1:], "(team rank 1 of 4): bad input")
	assert.Regexp(t, `^codelet "spmd" panicked on worker \d+ \(team rank 3 of 4\) at team_test\.go:\d+: index out of range`, msg[i3:])
	var te *scheduler.TaskError
	require.ErrorAs(t, task.Err(), &te)
	assert.Equal(t, 1, te.Rank)
	assert.Equal(t, 4, te.Size)

	// A task one worker runs says nothing of teams.
	one := &scheduler.Codelet{Name: "one", CPU: func(*scheduler.Call) error { return errors.New("alone") }}
	require.NoError(t, s.Submit(ctx, one))
	err = s.WaitAll(ctx)
	require.ErrorContains(t, err, `codelet "one" failed on worker`)
	assert.NotContains(t, err.Error(), "team rank")
}
