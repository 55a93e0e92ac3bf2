package dist_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// benchTouch is the benchmarks' task: it adds 1 to its first handle. It
// runs after the timed submissions.
var benchTouch = &scheduler.Codelet{Name: "touch", CPU: func(c *scheduler.Call) error {
	scheduler.VectorOf[float64](c, 0)[0]++
	return nil
}}

// BenchmarkSubmit is the cost of dist's Submit per task, with 1 and 10
// handles (one-element vectors; the task reads and writes the first and
// reads the others, or with xfer reads and writes them all):
//
//   - ranks=1: one rank, every task runs there;
//   - ranks=2/track: two in-process ranks, every handle owned by rank 0,
//     so rank 0 runs every task and rank 1 only tracks them (the
//     metrics run-ns/op and track-ns/op are each rank's own time);
//   - ranks=2/xfer: two ranks, every handle read and written by each
//     task and the tasks placed on ranks 0 and 1 in turn (OnRank), so
//     that every task moves every handle: a send on one rank and a
//     receive on the other per handle.
//
// Tasks are submitted in batches of 256 behind a task that holds the
// handles until the batch is submitted, so that no task runs while the
// program submits; WaitAll is not timed. With two ranks, ns/op is the
// wall time per task of both ranks submitting each task at once (the
// ranks meet at a barrier before and after each batch) and B/op and
// allocs/op are both ranks' together.
//
//	go test -run '^$' -bench 'Submit$' -benchmem ./scheduler/dist/
func BenchmarkSubmit(b *testing.B) {
	for _, ranks := range []int{1, 2} {
		kinds := []string{"local"}
		if ranks == 2 {
			kinds = []string{"track", "xfer"}
		}
		for _, kind := range kinds {
			for _, nh := range []int{1, 10} {
				b.Run(fmt.Sprintf("ranks=%d/%s/h=%d", ranks, kind, nh), func(b *testing.B) {
					benchSubmit(b, ranks, kind, nh)
				})
			}
		}
	}
}

func benchSubmit(b *testing.B, ranks int, kind string, nh int) {
	const batch = 256
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var spent [2]atomic.Int64 // each rank's time in Submit, ns
	b.ReportAllocs()
	b.StopTimer()
	b.ResetTimer()
	err := local.Run(ctx, ranks, func(ctx context.Context, c comm.Comm) error {
		ls, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPerfModelDir(""))
		if err != nil {
			return err
		}
		defer ls.Close()
		d, err := dist.New(ctx, c, ls)
		if err != nil {
			return err
		}
		defer d.Close()
		hs := make([]*dist.Handle, nh)
		for k := range hs {
			var data []float64
			if d.Rank() == 0 {
				data = make([]float64, 1)
			}
			if hs[k], err = dist.Register(d, 0, data, 1, 1); err != nil {
				return err
			}
		}
		args := make([]dist.Arg, 0, nh+1)
		gateArgs := make([]dist.Arg, 0, nh)
		for _, h := range hs {
			gateArgs = append(gateArgs, dist.RW(h))
		}
		lead := c.Rank() == 0
		for i := 0; i < b.N; i += batch {
			// Each rank's gate: only rank 0's runs.
			gate := make(chan struct{})
			block := &scheduler.Codelet{Name: "gate", CPU: func(*scheduler.Call) error { <-gate; return nil }}
			if err := d.Submit(ctx, block, gateArgs...); err != nil {
				return err
			}
			if err := c.Barrier(ctx); err != nil {
				return err
			}
			if lead {
				b.StartTimer()
			}
			start := time.Now()
			for k := range min(batch, b.N-i) {
				args = args[:0]
				switch kind {
				case "xfer":
					for _, h := range hs {
						args = append(args, dist.RW(h))
					}
					args = append(args, dist.OnRank((i+k)%2))
				default:
					args = append(args, dist.RW(hs[0]))
					for _, h := range hs[1:] {
						args = append(args, dist.R(h))
					}
				}
				if err := d.Submit(ctx, benchTouch, args...); err != nil {
					return err
				}
			}
			spent[c.Rank()].Add(int64(time.Since(start)))
			if err := c.Barrier(ctx); err != nil {
				return err
			}
			if lead {
				b.StopTimer()
			}
			close(gate)
			if err := d.WaitAll(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if ranks == 2 {
		names := [2]string{"rank0-ns/op", "rank1-ns/op"}
		if kind == "track" {
			names = [2]string{"run-ns/op", "track-ns/op"}
		}
		for r := range 2 {
			b.ReportMetric(float64(spent[r].Load())/float64(b.N), names[r])
		}
	}
}
