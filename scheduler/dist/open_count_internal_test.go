package dist

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
)

// TestSynchronousTaskCountedDoneOnce: the count of this rank's tasks not
// done (pos.open, which a stalled rank's answer and a stall error give)
// is 0 once every task is done, whether a task submitted Synchronous
// (With(scheduler.Synchronous())) succeeded, failed, or ran on after its
// Submit's context ended. A failed Synchronous task was counted done
// twice, by its callback and again by Submit's error path (the count
// went to -1, and the next stall report said "-1 tasks of the graph not
// done here"); one whose Submit gave up waiting, likewise once its task
// ended. On 2 in-process ranks, the tasks on rank 0 (rank 1 only tracks
// them); the count is read on every rank.
func TestSynchronousTaskCountedDoneOnce(t *testing.T) {
	sync := With(scheduler.Synchronous())
	noop := &scheduler.Codelet{Name: "noop", CPU: func(*scheduler.Call) error { return nil }}
	boom := &scheduler.Codelet{Name: "boom", CPU: func(*scheduler.Call) error { return errors.New("boom") }}
	t.Run("succeeds then asynchronous", func(t *testing.T) {
		runOpenCount(t, func(ctx context.Context, d *Scheduler, h *Handle) error {
			if err := d.Submit(ctx, noop, RW(h), sync); err != nil {
				return err
			}
			for range 10 {
				if err := d.Submit(ctx, noop, RW(h)); err != nil {
					return err
				}
			}
			return d.WaitAll(ctx)
		})
	})
	t.Run("fails", func(t *testing.T) {
		runOpenCount(t, func(ctx context.Context, d *Scheduler, h *Handle) error {
			err := d.Submit(ctx, boom, RW(h), sync)
			if d.Rank() == 0 && (err == nil || !strings.Contains(err.Error(), "boom")) {
				return fmt.Errorf("rank 0's Submit of a failing Synchronous task: %v", err)
			}
			if werr := d.WaitAll(ctx); !errors.Is(werr, ErrRankFailed) {
				return errors.Join(errors.New("WaitAll did not report the failed task"), werr)
			}
			return nil
		})
	})
	t.Run("context ends while waiting", func(t *testing.T) {
		started, release := make(chan struct{}), make(chan struct{})
		var ended atomic.Bool
		block := &scheduler.Codelet{Name: "block", CPU: func(*scheduler.Call) error {
			close(started)
			<-release
			ended.Store(true)
			return nil
		}}
		runOpenCount(t, func(ctx context.Context, d *Scheduler, h *Handle) error {
			if d.Rank() != 0 {
				_ = d.Submit(ctx, block, RW(h), sync) // rank 1 tracks it; it hears rank 0 stop
				_ = d.WaitAll(ctx)
				return nil
			}
			sctx, cancel := context.WithCancel(ctx)
			go func() {
				<-started
				cancel()
			}()
			err := d.Submit(sctx, block, RW(h), sync)
			if !errors.Is(err, context.Canceled) {
				return errors.Join(errors.New("Submit did not return when its context ended"), err)
			}
			// The task still runs (it waits for release): it is not done.
			// Submit's error path counted it done, so a stall report said
			// "0 tasks not done" while it ran.
			if n := d.pos.open.Load(); n != 1 {
				close(release)
				return fmt.Errorf("rank 0 counts %d tasks not done while its Synchronous task runs on after Submit returned, want 1", n)
			}
			// WaitAll waits for the task all the same.
			waited := make(chan bool, 1)
			go func() {
				_ = d.WaitAll(ctx)
				waited <- ended.Load()
			}()
			close(release)
			if !<-waited {
				return errors.New("WaitAll returned before the task it waits for ended")
			}
			return nil
		})
	})
}

// runOpenCount runs fn on 2 in-process ranks with a handle owned by
// rank 0, then checks on each rank, once its local scheduler is idle,
// that pos.open is 0.
func runOpenCount(t *testing.T, fn func(ctx context.Context, d *Scheduler, h *Handle) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	open := make([]int64, 2)
	err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
		if err != nil {
			return err
		}
		defer ls.Close()
		d, err := New(ctx, c, ls)
		if err != nil {
			return err
		}
		defer d.Close()
		var data []float64
		if c.Rank() == 0 {
			data = make([]float64, 4)
		}
		h, err := Register(d, 0, data, 4, 1)
		if err != nil {
			return err
		}
		if err := fn(ctx, d, h); err != nil {
			return err
		}
		_ = ls.WaitAll(ctx) // every task's callback has run
		open[c.Rank()] = d.pos.open.Load()
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 0}, open, "tasks not done, by rank")
}
