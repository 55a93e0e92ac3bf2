package dist_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// TestEndedWaitAllThenRunningTask: on 2 in-process ranks, a task of
// rank 0 writing its handle runs when rank 0 calls WaitAll with a
// context that has ended; WaitAll leaves the graph and returns while
// that task still runs (it waits for a channel). Then the program
// reads the handle's Data, Fetches it (with a live context, or the
// ended one), Unregisters it, or Closes, and only then does the task go
// on and write the data. Each waits for the task, or refuses (Fetch
// with the ended context returns its error, unless the task had ended
// when it began; Unregister returns the
// graph's failure, rank 0's departure): what it returns, or the
// registered memory after Close, holds the task's write, without a data
// race (go test -race). (Reading the registered slice itself right
// after that WaitAll would race the task: docs/distributed.md says so.)
// This passed before it was written: it pins down what the docs say.
func TestEndedWaitAllThenRunningTask(t *testing.T) {
	const n = 1 << 12
	for _, after := range []string{"Data", "Fetch", "FetchEnded", "Unregister", "Close"} {
		t.Run(after, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			running, release := make(chan struct{}), make(chan struct{})
			var waitErr, afterErr error
			var got []float64
			var ended atomic.Bool
			err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
				ls, err := scheduler.New(ctx, scheduler.WithWorkers(1))
				if err != nil {
					return err
				}
				defer ls.Close()
				d, err := dist.New(ctx, c, ls)
				if err != nil {
					return err
				}
				var mem []float64
				if c.Rank() == 0 {
					mem = make([]float64, n)
				}
				h, err := dist.Register(d, 0, mem, n, 1)
				if err != nil {
					return errors.Join(err, d.Close())
				}
				slow := &scheduler.Codelet{Name: "slow", CPU: func(call *scheduler.Call) error {
					close(running)
					<-release
					x := call.Data(0).([]float64)
					for i := range x {
						x[i] = 1
					}
					ended.Store(true)
					return nil
				}}
				serr := d.Submit(ctx, slow, dist.RW(h))
				if c.Rank() == 1 {
					// Its Submit may hear of rank 0's departure already.
					werr := serr
					if werr == nil {
						werr = d.WaitAll(ctx)
					}
					assert.ErrorIs(t, werr, dist.ErrRankFailed, "rank 1")
					return d.Close()
				}
				if serr != nil {
					return errors.Join(serr, d.Close())
				}
				select {
				case <-running:
				case <-ctx.Done():
					return errors.Join(ctx.Err(), d.Close())
				}
				endedCtx, cancel := context.WithCancel(ctx)
				cancel()
				waitErr = d.WaitAll(endedCtx)
				done := make(chan struct{})
				go func() {
					defer close(done)
					switch after {
					case "Data":
						got, _ = h.Data().([]float64)
					case "Fetch":
						var data any
						data, afterErr = h.Fetch(ctx)
						got, _ = data.([]float64)
					case "FetchEnded":
						// The program's ended context: Fetch refuses.
						var data any
						data, afterErr = h.Fetch(endedCtx)
						got, _ = data.([]float64)
					case "Unregister":
						var data any
						data, afterErr = d.Unregister(ctx, h)
						got, _ = data.([]float64)
					case "Close":
						afterErr = d.Close()
						got = mem
					}
				}()
				close(release)
				<-done
				if after != "Close" {
					return d.Close()
				}
				return nil
			})
			require.NoError(t, err)
			t.Logf("rank 0: WaitAll: %v\n%s: %v", waitErr, after, afterErr)
			assert.ErrorIs(t, waitErr, context.Canceled)
			switch after {
			case "FetchEnded":
				if afterErr != nil {
					// Else the task had ended when it began.
					assert.ErrorIs(t, afterErr, context.Canceled, "Fetch with the ended context")
					return
				}
			case "Unregister":
				// Refused: the graph failed when rank 0 left WaitAll.
				assert.ErrorContains(t, afterErr, "WaitAll on rank 0: context canceled")
				return
			}
			require.NoError(t, afterErr, after)
			require.Len(t, got, n, "what %s gave", after)
			assert.True(t, ended.Load(), "%s returned before the task ended", after)
			for i, v := range got {
				if v != 1 {
					t.Fatalf("%s: element %d is %v, not the task's 1", after, i, v)
				}
			}
		})
	}
}
