package dist_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// A task that names one handle twice, once in Redux (or Scratch, or
// Commute) mode and once in another, is refused by Submit on every rank,
// before the graph check, as the local scheduler refuses it. Found by a
// new-user trial (helper-131, random graphs with Redux): placed on the
// handle's writer the local scheduler refused it there only (the graph
// failed), while placed elsewhere it ran, the Redux access going into
// that rank's partial result and the R access reading the version before
// the reduction: the same submission succeeded or failed by placement.
func TestMixedModesOnOneHandleRefusedEverywhere(t *testing.T) {
	zero := &scheduler.Codelet{Name: "zero", CPU: func(c *scheduler.Call) error {
		clear(scheduler.VectorOf[float64](c, 0))
		return nil
	}}
	add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
		scheduler.VectorOf[float64](c, 0)[0] += scheduler.VectorOf[float64](c, 1)[0]
		return nil
	}}
	nop := &scheduler.Codelet{Name: "acc", CPU: func(*scheduler.Call) error { return nil }}
	for _, tc := range []struct {
		name string
		args func(h *dist.Handle) []dist.Arg
		want string
	}{
		{"Redux and R on a non-writer", func(h *dist.Handle) []dist.Arg {
			return []dist.Arg{dist.Redux(h), dist.R(h), dist.OnRank(1)}
		}, `handle "s" (#0, owner 0) is accessed as both Redux (argument 0) and R (argument 1)`},
		{"R and Redux on the writer", func(h *dist.Handle) []dist.Arg {
			return []dist.Arg{dist.R(h), dist.Redux(h)}
		}, `handle "s" (#0, owner 0) is accessed as both R (argument 0) and Redux (argument 1)`},
		{"Scratch and RW", func(h *dist.Handle) []dist.Arg {
			return []dist.Arg{dist.Scratch(h), dist.RW(h), dist.OnRank(1)}
		}, `as both Scratch (argument 0) and RW (argument 1)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			subErrs, waitErrs := make([]error, 2), make([]error, 2)
			err := runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
				var mem []float64
				if d.Rank() == 0 {
					mem = make([]float64, 1)
				}
				h, err := dist.Register(d, 0, mem, 1, 1, scheduler.Named("s"))
				if err != nil {
					return err
				}
				if err := h.SetReduction(zero, add); err != nil {
					return err
				}
				subErrs[d.Rank()] = d.Submit(ctx, nop, tc.args(h)...)
				waitErrs[d.Rank()] = d.WaitAll(ctx)
				return nil
			})
			require.NoError(t, err)
			for r := range 2 {
				require.ErrorIs(t, subErrs[r], comm.ErrInvalidArg, "rank %d", r)
				assert.ErrorIs(t, subErrs[r], scheduler.ErrInvalidMode, "rank %d", r)
				assert.Contains(t, subErrs[r].Error(), tc.want, "rank %d", r)
				assert.NoError(t, waitErrs[r], "rank %d: the refused task is no submission", r)
			}
		})
	}
}
