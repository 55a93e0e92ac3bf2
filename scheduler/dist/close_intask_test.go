package dist_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// TestWaitFromTaskRefused: a task's code that calls the dist scheduler's
// WaitAll or Close while the program's WaitAll or Close waits for that
// task gets scheduler.ErrInTask at once, as the local scheduler's waits
// do, and the program's wait returns. Since WaitAll and Close's wait
// were serialized per rank, the task's call waited for the program's
// wait, which waited for the task: the rank hung until PZ_DIST_TIMEOUT.
func TestWaitFromTaskRefused(t *testing.T) {
	for _, tc := range []struct{ inTask, program string }{
		{"WaitAll", "WaitAll"}, {"Close", "WaitAll"}, {"Close", "Close"},
	} {
		t.Run(tc.inTask+" during "+tc.program, func(t *testing.T) {
			err := runRanks(t, 1, func(ctx context.Context, d *dist.Scheduler) error {
				got := make(chan error, 1)
				cl := &scheduler.Codelet{Name: "waiter", CPU: func(*scheduler.Call) error {
					for !dist.Waiting(d) { // the program's wait holds the rank
						runtime.Gosched()
					}
					if tc.inTask == "WaitAll" {
						got <- d.WaitAll(context.Background())
					} else {
						got <- d.Close()
					}
					return nil
				}}
				h, err := dist.Register(d, 0, make([]float64, 1), 1, 1)
				if err != nil {
					return err
				}
				if err := d.Submit(ctx, cl, dist.RW(h)); err != nil {
					return err
				}
				done := make(chan error, 1)
				go func() {
					if tc.program == "WaitAll" {
						done <- d.WaitAll(ctx)
					} else {
						done <- d.Close()
					}
				}()
				select {
				case err := <-done:
					if tc.inTask == "WaitAll" && err != nil {
						return fmt.Errorf("program's %s: %w", tc.program, err)
					}
				case <-time.After(20 * time.Second): // bounds a hang; it returns at once
					return fmt.Errorf("program's %s did not return in 20s", tc.program)
				}
				if err := <-got; !errors.Is(err, scheduler.ErrInTask) {
					return fmt.Errorf("%s in a task: %v, want ErrInTask", tc.inTask, err)
				}
				return nil
			})
			require.NoError(t, err)
		})
	}
}

// TestWaitAllHeedsContextWhileClosing: a WaitAll called while Close on
// another goroutine waits for the graph returns when its context ends,
// rather than when Close's wait does.
func TestWaitAllHeedsContextWhileClosing(t *testing.T) {
	err := runRanks(t, 1, func(ctx context.Context, d *dist.Scheduler) error {
		release := make(chan struct{})
		cl := &scheduler.Codelet{Name: "held", CPU: func(*scheduler.Call) error {
			<-release
			return nil
		}}
		h, err := dist.Register(d, 0, make([]float64, 1), 1, 1)
		if err != nil {
			return err
		}
		if err := d.Submit(ctx, cl, dist.RW(h)); err != nil {
			return err
		}
		closed := make(chan error, 1)
		go func() { closed <- d.Close() }()
		for !dist.Closing(d) || !dist.Waiting(d) {
			runtime.Gosched()
		}
		wctx, cancel := context.WithCancel(ctx)
		cancel()
		waited := make(chan error, 1)
		go func() { waited <- d.WaitAll(wctx) }()
		select {
		case err := <-waited:
			if !errors.Is(err, context.Canceled) {
				close(release)
				return fmt.Errorf("WaitAll with a canceled context: %v, want context.Canceled", err)
			}
		case <-time.After(20 * time.Second): // bounds a hang; it returns at once
			close(release)
			return errors.New("WaitAll with a canceled context waited for Close")
		}
		close(release)
		return <-closed
	})
	require.NoError(t, err)
}
