package scheduler_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// holdLink is a bwLink whose far side holds the data of one handle
// (scheduler.HoldingLink).
type holdLink struct {
	bwLink
	held *atomic.Pointer[scheduler.Handle]
}

func (l holdLink) Holds(h *scheduler.Handle) bool { return l.held.Load() == h }

// TestDMDAHoldingLink: dmda prices no transfer for the data a task only
// reads that a linked worker's far side holds (HoldingLink), and so
// prefers that worker. Two linked workers, 1 GB/s each; four tasks of 1
// ms read one 8 MiB handle (8 ms over a link) and write 64 bytes of
// their own. Worker 1 holds the handle: every task goes there (finishes
// at 1 to 4 ms, against 9 ms on worker 0). A link that ignored what its
// far side holds priced both workers alike and split the tasks 2 and 2,
// as it still does when neither holds it.
func TestDMDAHoldingLink(t *testing.T) {
	ctx := testCtx(t)
	for _, tc := range []struct {
		name string
		hold bool
		want []int
	}{{"held", true, []int{0, 4}}, {"not-held", false, []int{2, 2}}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			model := "hold-" + tc.name
			ran := make([]int, 2)
			placed := make(chan struct{})
			cl := &scheduler.Codelet{Name: model, Model: scheduler.HistoryModel(model), CPU: func(c *scheduler.Call) error {
				<-placed
				ran[c.Worker]++ // each worker its own count, read after WaitAll
				return nil
			}}
			var held, none atomic.Pointer[scheduler.Handle] // worker 1's far side, worker 0's
			bw := bwLink{latency: 10 * time.Microsecond, bw: 1e9}
			s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPolicy("dmda"),
				scheduler.WithPerfModelDir(dir), scheduler.WithGetenv(func(string) string { return "" }),
				scheduler.WithWorkerLinks(map[int]scheduler.WorkerLink{0: holdLink{bw, &none}, 1: holdLink{bw, &held}}))
			require.NoError(t, err)
			defer s.Close()
			in, err := s.RegisterVector(make([]float64, 1<<20))
			require.NoError(t, err)
			outs := make([]*scheduler.Handle, 4)
			for i := range outs {
				outs[i], err = s.RegisterVector(make([]float64, 8))
				require.NoError(t, err)
			}
			writeModel(t, dir, model, scheduler.NewTask(cl, scheduler.R(in), scheduler.W(outs[0])).Footprint(), time.Millisecond)
			if tc.hold {
				held.Store(in)
			}
			b := s.NewBatch()
			for _, o := range outs {
				require.NoError(t, b.SubmitTask(ctx, scheduler.NewTask(cl, scheduler.R(in), scheduler.W(o))))
			}
			b.Flush()
			close(placed)
			require.NoError(t, s.WaitAll(ctx))
			assert.Equal(t, tc.want, ran, "tasks run by workers 0 and 1")
		})
	}
}
