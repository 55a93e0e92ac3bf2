package scheduler_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// Deleting a context whose tasks lack workers: its tasks complete and
// it is deleted before Close.

// TestContextDeleteLendsWorkers: Delete lends a context that has tasks
// and too few workers for them (none; fewer than a waiting team) the
// workers it lacks, from its inheritor; they run its tasks, then the
// context is deleted and they are the inheritor's.
func TestContextDeleteLendsWorkers(t *testing.T) {
	t.Run("no workers", func(t *testing.T) {
		ctx := testCtx(t)
		s := newSched(t, scheduler.WithWorkers(2))
		c, err := s.NewContext("C")
		require.NoError(t, err)
		var ran atomic.Int32
		cl := &scheduler.Codelet{Name: "t", CPU: func(*scheduler.Call) error { ran.Add(1); return nil }}
		for range 5 {
			require.NoError(t, s.Submit(ctx, cl, scheduler.InContext(c)))
		}
		require.NoError(t, c.Delete(nil))
		waitDeleted(t, c)
		assert.Equal(t, int32(5), ran.Load(), "every task of the deleted context ran")
		assert.Equal(t, []int{0, 1}, s.Global().Workers())
		lent := 0
		for _, r := range s.Resizes() {
			if r.To == "C" && r.Reason == "delete" {
				lent++
			}
		}
		assert.Equal(t, 1, lent, "one worker lent: %v", s.Resizes())
		require.NoError(t, s.WaitAll(ctx))
	})
	t.Run("team", func(t *testing.T) {
		ctx := testCtx(t)
		s := newSched(t, scheduler.WithWorkers(4))
		tc, err := s.NewContext("T", scheduler.ContextWorkers(0, 1, 2))
		require.NoError(t, err)
		u, err := s.NewContext("U", scheduler.ContextWorkers(3))
		require.NoError(t, err)
		// The gate holds a team that formed before the move below, so
		// that the others are still to run when T loses a worker.
		gate := make(chan struct{})
		var shares atomic.Int32
		spmd := &scheduler.Codelet{Name: "spmd3", Parallel: scheduler.SPMD, CPU: func(*scheduler.Call) error {
			<-gate
			shares.Add(1)
			return nil
		}}
		const teams = 4
		for range teams {
			require.NoError(t, s.Submit(ctx, spmd, scheduler.WithTeam(3), scheduler.InContext(tc)))
		}
		require.NoError(t, s.MoveWorkers(tc, u, 2))
		require.NoError(t, tc.Delete(u))
		close(gate)
		waitDeleted(t, tc)
		assert.Equal(t, int32(3*teams), shares.Load(), "three members ran each team")
		assert.Equal(t, []int{0, 1, 2, 3}, u.Workers(), "the inheritor has T's workers, the lent one included")
		require.NoError(t, s.WaitAll(ctx))
	})
}

// TestContextBeingDeletedTakesWorkers: a context being deleted whose
// tasks have no workers, and none to lend, keeps them waiting; WaitAll
// says so with advice that works: AddWorkers and MoveWorkers into it are
// accepted, while it refuses to be deleted again or to give workers
// away, saying it is being deleted.
func TestContextBeingDeletedTakesWorkers(t *testing.T) {
	for _, how := range []string{"MoveWorkers", "AddWorkers"} {
		t.Run(how, func(t *testing.T) {
			ctx := testCtx(t)
			s := newSched(t, scheduler.WithWorkers(2))
			b, err := s.NewContext("B", scheduler.ContextWorkers(0, 1))
			require.NoError(t, err)
			c, err := s.NewContext("C")
			require.NoError(t, err)
			var ran atomic.Int32
			cl := &scheduler.Codelet{Name: "t", CPU: func(*scheduler.Call) error { ran.Add(1); return nil }}
			for range 5 {
				require.NoError(t, s.Submit(ctx, cl, scheduler.InContext(c)))
			}
			// Its inheritor (global) has no free worker to lend: B has them.
			require.NoError(t, c.Delete(nil))
			ended, cancel := context.WithCancel(ctx)
			cancel()
			err = c.WaitAll(ended)
			require.ErrorIs(t, err, scheduler.ErrNoWorkers)
			assert.ErrorContains(t, err, `"C" has 5 tasks pending and no workers; it is being deleted: give it workers (AddWorkers, MoveWorkers into it)`)

			err = c.Delete(nil)
			assert.ErrorIs(t, err, scheduler.ErrContextDeleted)
			assert.ErrorContains(t, err, "being deleted")
			err = s.MoveWorkers(c, b, 0)
			assert.ErrorIs(t, err, scheduler.ErrContextDeleted)
			assert.ErrorContains(t, err, "being deleted")

			if how == "MoveWorkers" {
				require.NoError(t, s.MoveWorkers(b, c, 1))
			} else {
				require.NoError(t, b.RemoveWorkers(1))
				require.NoError(t, c.AddWorkers(1))
			}
			waitDeleted(t, c)
			assert.Equal(t, int32(5), ran.Load())
			assert.Equal(t, s.Global(), s.WorkerContext(1), "the worker went on to the inheritor")
			require.ErrorIs(t, c.AddWorkers(1), scheduler.ErrContextDeleted, "deleted: no more workers")
			require.NoError(t, c.WaitAll(ctx))
		})
	}
}
