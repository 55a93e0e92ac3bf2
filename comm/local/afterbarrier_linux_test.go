package local_test

import (
	"context"
	"syscall"
	"testing"

	"github.com/pzgo/pz/comm"
)

// BenchmarkAfterBarrier is pzrun bench comm's 8-byte AllReduce step (a
// Barrier, then the collective) on 2 ranks, back to back. It also reports
// in how many iterations both ranks ran on the same OS thread right after
// the Barrier (shared-threads, 0 to 1): two ranks on one P take turns
// instead of running at once, which is what spinWait's long poll
// (spinFit) is for.
func BenchmarkAfterBarrier(b *testing.B) {
	tids := make([][]int, 2)
	benchRanks(b, 2, func(c comm.Comm) func(context.Context) error {
		r := c.Rank()
		tids[r] = make([]int, 0, b.N)
		send, recv := []float64{1}, []float64{0}
		return func(ctx context.Context) error {
			if err := c.Barrier(ctx); err != nil {
				return err
			}
			tids[r] = append(tids[r], syscall.Gettid())
			return comm.AllReduceTo(ctx, c, recv, send, comm.Sum)
		}
	})
	same := 0
	for i := range tids[0] {
		if tids[0][i] == tids[1][i] {
			same++
		}
	}
	b.ReportMetric(float64(same)/float64(max(len(tids[0]), 1)), "shared-threads")
}
