package dist_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// pingCutComm is the master's communicator in TestMasterStartFailureStopsWorkers:
// on its duplicate, the master's ping number at to rank to (counting
// from 0) ends the master's context (cancel) before it is sent.
type pingCutComm struct {
	comm.Comm
	to, at int
	cancel context.CancelFunc
	mu     *sync.Mutex
	sent   *int // pings sent to rank to so far
}

// Dup implements comm.Comm: the duplicate (RunMaster's) cuts the pings.
func (p *pingCutComm) Dup(ctx context.Context) (comm.Comm, error) {
	d, err := p.Comm.Dup(ctx)
	if err != nil {
		return nil, err
	}
	return &pingCutComm{Comm: d, to: p.to, at: p.at, cancel: p.cancel, mu: p.mu, sent: p.sent}, nil
}

// Send implements comm.Comm.
func (p *pingCutComm) Send(ctx context.Context, buf comm.Buf, dest, tag int) error {
	if tag == dist.PingTag && dest == p.to {
		p.mu.Lock()
		n := *p.sent
		*p.sent++
		p.mu.Unlock()
		if n == p.at {
			p.cancel()
		}
	}
	return p.Comm.Send(ctx, buf, dest, tag)
}

// TestMasterStartFailureStopsWorkers: the master's context ends while
// it pings the worker ranks at start-up (measureLinks), before rank 1's
// first ping, in the middle of rank 1's, or before rank 2's (rank 1
// done). The master's RunMaster returned its error, but the worker
// ranks were never told: those still answering pings, and those done
// with them, waited for ever (their contexts do not end: in-process
// ranks of local.New, which, unlike local.Run, do not cancel the others
// when one returns). Now each worker rank's RunMaster returns promptly
// an error naming the master's failure. On 3 in-process ranks.
func TestMasterStartFailureStopsWorkers(t *testing.T) {
	for _, cut := range []struct{ to, at int }{{1, 0}, {1, 4}, {2, 0}} {
		t.Run(fmt.Sprintf("rank%d_ping%d", cut.to, cut.at), func(t *testing.T) {
			const n = 3
			cs, err := local.New(n)
			require.NoError(t, err)
			reg, err := dist.NewRegistry(mwInc0)
			require.NoError(t, err)
			errs := make([]error, n)
			done := make([]chan struct{}, n)
			ran := make(chan struct{}, n)
			for r := range n {
				done[r] = make(chan struct{})
				go func() {
					defer close(done[r])
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					c := cs[r]
					if r == 0 {
						c = &pingCutComm{Comm: c, to: cut.to, at: cut.at, cancel: cancel, mu: &sync.Mutex{}, sent: new(int)}
					}
					errs[r] = dist.RunMaster(ctx, c, 0, reg, []scheduler.Option{scheduler.WithWorkers(1)}, func(context.Context, *dist.Master) error {
						ran <- struct{}{}
						return nil
					})
				}()
			}
			timeout := time.NewTimer(testTimeout)
			defer timeout.Stop()
			for r := range n {
				select {
				case <-done[r]:
				case <-timeout.C:
					t.Fatalf("rank %d's RunMaster has not returned after %v (the master's: %v)", r, testTimeout, errs[0])
				}
			}
			assert.Empty(t, ran, "the master's function ran")
			t.Logf("master: %v", errs[0])
			require.ErrorIs(t, errs[0], context.Canceled, "the master's RunMaster")
			for r := 1; r < n; r++ {
				t.Logf("rank %d: %v", r, errs[r])
				assert.ErrorContains(t, errs[r], fmt.Sprintf("dist: RunMaster: rank %d: the master failed to start: dist: RunMaster: master rank 0: measuring the link to rank %d", r, cut.to), "rank %d", r)
				assert.ErrorContains(t, errs[r], "context canceled", "rank %d", r)
			}
		})
	}
}
