package cholesky

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/internal/apps/tiled"
	"github.com/pzgo/pz/scheduler"
)

// countingCodelets returns cl's codelets with their CPU functions
// counting the tasks that ran in *ran; the first POTRF also calls
// first.
func countingCodelets(cl *Codelets, ran *atomic.Int64, first func()) *Codelets {
	wrap := func(c *scheduler.Codelet, hook func()) *scheduler.Codelet {
		cc := *c
		fn := c.CPU
		cc.CPU = func(call *scheduler.Call) error {
			if ran.Add(1) == 1 && hook != nil {
				hook()
			}
			return fn(call)
		}
		return &cc
	}
	return &Codelets{Potrf: wrap(cl.Potrf, first), Trsm: wrap(cl.Trsm, nil), Syrk: wrap(cl.Syrk, nil), Gemm: wrap(cl.Gemm, nil)}
}

// A factorization whose context ends (pzrun's SIGINT or SIGTERM) stops:
// the tile tasks not yet started do not run, so that Factor and
// FactorTiles return, and the scheduler closes, once the tasks running
// then are done, not after the whole graph has run (at -n 12288 a
// SIGTERM took a minute to end pzrun cholesky).
func TestFactorStopsWhenContextEnds(t *testing.T) {
	const n, b = 512, 32 // 16×16 tiles: 816 tasks
	total := taskCounts(n / b).total()
	for _, layout := range []string{"tiles", "matrix"} {
		t.Run(layout, func(t *testing.T) {
			s, err := scheduler.New(testCtx(t), scheduler.WithWorkers(2), scheduler.WithPerfModelDir(""))
			require.NoError(t, err)
			ctx, cancel := context.WithCancelCause(testCtx(t))
			stop := errors.New("stopped by the test")
			var ran atomic.Int64
			cl := countingCodelets(newCodelets[float64](), &ran, func() { cancel(stop) })
			a := tiled.SPD[float64](n, 3)
			if layout == "tiles" {
				_, err = FactorTiles(ctx, s, cl, ToTiles(a, n, b), nil)
			} else {
				_, err = Factor(ctx, s, cl, a, n, b, nil)
			}
			require.ErrorIs(t, err, stop)
			// Close reports the canceled tasks WaitAll had not.
			if err := s.Close(); err != nil {
				require.ErrorIs(t, err, scheduler.ErrCanceled)
			}
			// The first POTRF, and at most one task per other worker
			// started before it canceled: nothing else may run.
			assert.LessOrEqual(t, ran.Load(), int64(2), "tasks run of %d after the context ended in the first", total)
		})
	}
}
