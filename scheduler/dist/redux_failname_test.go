package dist_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// A reduction's combine that fails on a rank other than the handle's
// writer, while that rank folds its workers' copies into its partial
// result before sending it, is named on every rank as the writer's
// combine is: by the submission the transfer serves and the data. Found
// by a new-user trial (helper-131): a combine made to fail on rank 1 gave
// 'rank 1: scheduler: task "dist.send" canceled: a task it depends on
// failed: ... combining a reduction copy of matrix handle 1x1: combine
// broke' on every rank: an internal codelet, no submission, no handle.
// The writer's combine that WaitAll submits is named as WaitAll's.
func TestFailedPartialCombineNamesItsSubmission(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failOn   int  // the rank whose combine fails
		read     bool // a task reads the handle after the reduction (else WaitAll ends it)
		messages []string
	}{
		{"partial", 1, true, []string{
			`rank 1: sending handle "partial of handle \"sum\" (#0, owner 0) on rank 1" (#1, owner 1) to rank 0 for submission #2: `,
			`combining a reduction copy of handle "partial of handle \"sum\" (#0, owner 0) on rank 1": combine broke`,
		}},
		// The writer's combine of rank 1's partial result, which WaitAll
		// submits: it said "for submission #1", as if the last Redux
		// task had ended the reduction.
		{"writer at WaitAll", 0, false, []string{
			`rank 0: task "add" at WaitAll after submission #1: RW("sum") R(`,
			"combine broke",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { testFailedCombine(t, tc.failOn, tc.read, tc.messages) })
	}
}

func testFailedCombine(t *testing.T, failOn int, read bool, messages []string) {
	zero := &scheduler.Codelet{Name: "zero", CPU: func(c *scheduler.Call) error {
		clear(scheduler.VectorOf[float64](c, 0))
		return nil
	}}
	one := &scheduler.Codelet{Name: "one", CPU: func(c *scheduler.Call) error {
		scheduler.VectorOf[float64](c, 0)[0]++
		return nil
	}}
	reader := &scheduler.Codelet{Name: "read", CPU: func(*scheduler.Call) error { return nil }}
	errs := make([]error, 2)
	err := runRanks(t, 2, func(ctx context.Context, d *dist.Scheduler) error {
		add := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
			if d.Rank() == failOn {
				return errors.New("combine broke")
			}
			scheduler.VectorOf[float64](c, 0)[0] += scheduler.VectorOf[float64](c, 1)[0]
			return nil
		}}
		var mem []float64
		if d.Rank() == 0 {
			mem = make([]float64, 1)
		}
		h, err := dist.Register(d, 0, mem, 1, 1, scheduler.Named("sum"))
		if err != nil {
			return err
		}
		if err := h.SetReduction(zero, add); err != nil {
			return err
		}
		// #0, #1 on rank 1 (both workers may take one: rank 1 combines
		// its copies into its partial result), #2 ends the reduction on
		// rank 0 (else WaitAll does), for which rank 1 sends its partial
		// result.
		for range 2 {
			if err := d.Submit(ctx, one, dist.Redux(h), dist.OnRank(1)); err != nil {
				errs[d.Rank()] = err // the failure may be heard of already
				return nil
			}
		}
		if read {
			if err := d.Submit(ctx, reader, dist.R(h)); err != nil {
				errs[d.Rank()] = err
				return nil
			}
		}
		errs[d.Rank()] = d.WaitAll(ctx)
		return nil
	})
	require.NoError(t, err)
	for r, e := range errs {
		require.ErrorIs(t, e, dist.ErrRankFailed, "rank %d", r)
		msg := e.Error()
		for _, m := range messages {
			assert.Contains(t, msg, m, "rank %d", r)
		}
	}
}
