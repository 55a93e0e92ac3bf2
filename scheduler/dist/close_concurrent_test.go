package dist_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// TestCloseDuringWaitAll: Close called on another goroutine while
// WaitAll runs on one rank (here just before WaitAll's agreement on the
// outcome, its submissions not yet marked waited for) waits for that
// WaitAll and starts no second comparison of the graphs, which the other
// ranks never join: that Close waited for ever (for PZ_DIST_TIMEOUT under
// rt.Scheduler). Submit and WaitAll afterwards return ErrClosed saying
// that Close was called on this rank.
func TestCloseDuringWaitAll(t *testing.T) {
	inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
		scheduler.VectorOf[float64](c, 0)[0]++
		return nil
	}}
	err := runRanks(t, 3, func(ctx context.Context, d *dist.Scheduler) error {
		var mem []float64
		if d.Rank() == 0 {
			mem = make([]float64, 1)
		}
		h, err := dist.Register(d, 0, mem, 1, 1, scheduler.Named("x"))
		if err != nil {
			return err
		}
		for r := range 3 {
			if err := d.Submit(ctx, inc, dist.RW(h), dist.OnRank(r)); err != nil {
				return err
			}
		}
		if d.Rank() != 1 {
			if err := d.WaitAll(ctx); err != nil {
				return err
			}
			v, err := h.Fetch(ctx)
			if err == nil && v.([]float64)[0] != 3 {
				err = fmt.Errorf("x = %v, want 3", v)
			}
			return err
		}
		closed := make(chan error, 1)
		dist.BeforeAgreement(d, func() {
			go func() { closed <- d.Close() }()
			for !dist.Closing(d) {
				runtime.Gosched()
			}
		})
		if err := d.WaitAll(ctx); err != nil {
			return fmt.Errorf("WaitAll beside Close: %w", err)
		}
		select {
		case err := <-closed:
			if err != nil {
				return fmt.Errorf("Close beside WaitAll: %w", err)
			}
		case <-time.After(20 * time.Second): // bounds a hang; Close returns at once
			return errors.New("Close beside WaitAll did not return in 20s")
		}
		for _, err := range []error{d.Submit(ctx, inc, dist.RW(h)), d.WaitAll(ctx)} {
			if !errors.Is(err, dist.ErrClosed) {
				return fmt.Errorf("after Close: %v, want ErrClosed", err)
			}
		}
		return nil
	})
	require.NoError(t, err)
}

// TestSubmitWhileClosing: a rank whose Close runs on another goroutine
// while its program still submits refuses the submissions from the
// moment Close began (ErrClosed saying that Close was called on this
// rank), not only once Close returned, so that the graph check tells the
// other ranks where it stopped.
func TestSubmitWhileClosing(t *testing.T) {
	inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
		scheduler.VectorOf[float64](c, 0)[0]++
		return nil
	}}
	const half = 10
	// The other ranks come to WaitAll, for which Close's comparison of
	// the graphs waits, only once rank 1 has tried to submit after
	// Close began.
	tried := make(chan struct{})
	err := runRanks(t, 3, func(ctx context.Context, d *dist.Scheduler) error {
		hs := make([]*dist.Handle, 3)
		for r := range hs {
			var mem []float64
			if d.Rank() == r {
				mem = make([]float64, 1)
			}
			h, err := dist.Register(d, r, mem, 1, 1)
			if err != nil {
				return err
			}
			hs[r] = h
		}
		submit := func(i int) error {
			return d.Submit(ctx, inc, dist.R(hs[(i+1)%3]), dist.RW(hs[i%3]))
		}
		for i := range half {
			if err := submit(i); err != nil {
				return err
			}
		}
		stopped := fmt.Sprintf("rank 1 stopped after %d submissions", half)
		if d.Rank() == 1 {
			closed := make(chan error, 1)
			go func() { closed <- d.Close() }()
			for !dist.Closing(d) {
				runtime.Gosched()
			}
			err := submit(half)
			close(tried)
			if !errors.Is(err, dist.ErrClosed) || !strings.Contains(err.Error(), "Close was called on this rank") {
				return fmt.Errorf("Submit after Close began: %v; want ErrClosed saying Close was called", err)
			}
			if err := <-closed; err == nil || !strings.Contains(err.Error(), stopped) {
				return fmt.Errorf("Close: %v; want the graphs' difference: %s", err, stopped)
			}
			return nil
		}
		for i := half; i < 2*half; i++ {
			if err := submit(i); err != nil {
				return err
			}
		}
		<-tried
		if err := d.WaitAll(ctx); err == nil || !strings.Contains(err.Error(), stopped) {
			return fmt.Errorf("WaitAll: %v; want the graphs' difference: %s", err, stopped)
		}
		return nil
	})
	require.NoError(t, err)
}
