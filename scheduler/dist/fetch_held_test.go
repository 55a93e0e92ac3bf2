package dist_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// TestFetchRefusesVersionNotHeld: Fetch on a rank that does not hold a
// handle's latest version - a rank that never read it, a reader whose
// cached copy a later write made stale, the owner before WaitAll brings
// back a version another rank wrote, the holder while a reduction across
// ranks is in progress - fails with dist.ErrNotHeld naming the handle and
// where the version is, instead of returning nil or old data with a nil
// error; a rank that holds it gets the latest data.
func TestFetchRefusesVersionNotHeld(t *testing.T) {
	set := &scheduler.Codelet{Name: "set", CPU: func(c *scheduler.Call) error {
		scheduler.VectorOf[float64](c, 0)[0] = c.Arg.(float64)
		return nil
	}}
	read := &scheduler.Codelet{Name: "read", CPU: func(c *scheduler.Call) error { return nil }}
	zero := &scheduler.Codelet{Name: "zero", CPU: func(c *scheduler.Call) error {
		clear(scheduler.VectorOf[float64](c, 0))
		return nil
	}}
	add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
		scheduler.VectorOf[float64](c, 0)[0] += scheduler.VectorOf[float64](c, 1)[0]
		return nil
	}}
	inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
		scheduler.VectorOf[float64](c, 0)[0]++
		return nil
	}}
	err := runRanks(t, 3, func(ctx context.Context, d *dist.Scheduler) error {
		var mem []float64
		if d.Rank() == 0 {
			mem = []float64{0}
		}
		h, err := dist.Register(d, 0, mem, 1, 1, scheduler.Named("x"))
		if err != nil {
			return err
		}
		// fetch checks this rank's Fetch: the value want, or ErrNotHeld
		// with an error that says each of says.
		fetch := func(step string, want float64, refused bool, says ...string) error {
			v, err := h.Fetch(ctx)
			switch {
			case refused && !errors.Is(err, dist.ErrNotHeld):
				return fmt.Errorf("%s: rank %d: Fetch returned %v, %v; want dist.ErrNotHeld", step, d.Rank(), v, err)
			case refused:
				for _, s := range says {
					if !strings.Contains(err.Error(), s) {
						return fmt.Errorf("%s: rank %d: %q does not say %q", step, d.Rank(), err, s)
					}
				}
				return nil
			case err != nil:
				return fmt.Errorf("%s: rank %d: %w", step, d.Rank(), err)
			case v.([]float64)[0] != want:
				return fmt.Errorf("%s: rank %d: Fetch gives %v, want %v", step, d.Rank(), v, want)
			}
			return nil
		}
		// Version 1 read on rank 1, then version 2 written on rank 0.
		if err := d.Submit(ctx, set, dist.W(h), dist.With(scheduler.WithArg(1.0))); err != nil {
			return err
		}
		if err := d.Submit(ctx, read, dist.R(h), dist.OnRank(1)); err != nil {
			return err
		}
		if err := d.Submit(ctx, set, dist.W(h), dist.With(scheduler.WithArg(2.0))); err != nil {
			return err
		}
		if err := d.WaitAll(ctx); err != nil {
			return err
		}
		switch d.Rank() {
		case 0:
			err = fetch("after WaitAll", 2, false)
		case 1: // holds version 1
			err = fetch("stale copy", 0, true, `handle "x"`, "rank 1", "rank 0")
		case 2: // never had it
			err = fetch("no copy", 0, true, `handle "x"`, "rank 2", "rank 0")
		}
		if err != nil {
			return err
		}
		// Version 3 written on rank 1: the owner's memory is stale until
		// WaitAll brings it back.
		if err := d.Submit(ctx, set, dist.W(h), dist.OnRank(1), dist.With(scheduler.WithArg(3.0))); err != nil {
			return err
		}
		switch d.Rank() {
		case 0:
			err = fetch("owner before WaitAll", 0, true, "rank 1", "WaitAll")
		case 1:
			err = fetch("writer before WaitAll", 3, false)
		}
		if err != nil {
			return err
		}
		if err := d.WaitAll(ctx); err != nil {
			return err
		}
		if d.Rank() < 2 {
			if err := fetch("after WaitAll", 3, false); err != nil {
				return err
			}
		}
		// A reduction on ranks 1 and 2 into x: no rank has the sum
		// until it is combined.
		if err := h.SetReduction(zero, add); err != nil {
			return err
		}
		for r := 1; r <= 2; r++ {
			if err := d.Submit(ctx, inc, dist.Redux(h), dist.OnRank(r)); err != nil {
				return err
			}
		}
		if d.Rank() < 2 {
			if err := fetch("during a reduction", 0, true, "reduction"); err != nil {
				return err
			}
		}
		if err := d.WaitAll(ctx); err != nil {
			return err
		}
		if d.Rank() == 0 {
			return fetch("after the reduction", 5, false)
		}
		return nil
	})
	require.NoError(t, err)
}
