package dist

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/scheduler"
)

// In master/worker mode every task a proxy worker takes moves its data
// to the worker rank and its written data back (but for the read-only
// data the rank holds: master_cache.go, heldLink). The master's dmda policy sees that cost
// through a scheduler.WorkerLink per worker rank, as StarPU's MPI
// master/slave workers are a memory node of their own whose transfers
// its bus model prices: a rankLink starts from a ping of two sizes at
// RunMaster's start (latency + bytes / bandwidth) and is refined by the
// round trips of the tasks as they run, whose worker ranks report the
// tasks' own compute time (resultHeader.ComputeNs), which the codelets'
// performance models record (Call.SetModelTime) in place of the round
// trip.

// The ping's sizes and repeats: the latency from pingSmall bytes, the
// bandwidth from pingLarge, each way, the fastest of pingRepeat.
const (
	pingSmall  = 8
	pingLarge  = 1 << 20
	pingRepeat = 3
	pingTag    = slotTagBase - 2
)

// rankLink is the master's model of its link to one worker rank: a task
// costs factor × (2 × latency + bytes × nsPerByte), both ways. The
// factor, 1 after the ping, follows the ratio of each task's measured
// transfers to the ping's prediction: the mean of the first linkFirst
// tasks' ratios, then an exponential average, one task's ratio bounded
// to 4 times the factor either way (one pause of the garbage collector
// does not quadruple it). A task's transfers cost more than a ping's:
// the codec of its header, the worker rank's registration of its buffers
// (and their allocation when their sizes differ from the slot's task
// before: slotBufs), several slots of a rank sharing its link, and
// on a loaded machine 20 to 100 times as much (in-process ranks on 2
// cores).
type rankLink struct {
	latencyNs, nsPerByte float64 // from the ping

	factor atomic.Uint64 // math.Float64bits of the factor, read by Cost on every push
	mu     sync.Mutex    // orders observe's updates
	tasks  int64         // observations taken; guarded by mu
}

func newRankLink(latencyNs, nsPerByte float64) *rankLink {
	l := &rankLink{latencyNs: latencyNs, nsPerByte: nsPerByte}
	l.factor.Store(math.Float64bits(1))
	return l
}

// Cost implements scheduler.WorkerLink.
func (l *rankLink) Cost(in, out int64) float64 {
	return math.Float64frombits(l.factor.Load()) * l.base(in, out)
}

// base is the ping's prediction for a task of in bytes out and out
// bytes back.
func (l *rankLink) base(in, out int64) float64 {
	return 2*l.latencyNs + float64(in+out)*l.nsPerByte
}

// linkFirst is how many tasks' ratios set the factor as their mean;
// linkWeight is the weight of each later one in the factor's average.
const (
	linkFirst  = 4
	linkWeight = 1.0 / 8
)

// observe takes in the transfers of one task that moved in and out
// bytes in ns nanoseconds.
func (l *rankLink) observe(in, out int64, ns float64) {
	b := l.base(in, out)
	if !(b > 0) || !(ns > 0) || math.IsInf(ns, 0) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r, f := ns/b, math.Float64frombits(l.factor.Load())
	if l.tasks < linkFirst {
		// Calibrating: the mean of the first ratios, unbounded.
		f = (f*float64(l.tasks) + r) / float64(l.tasks+1)
	} else {
		r = min(max(r, f/4), f*4)
		f += (r - f) * linkWeight
	}
	l.factor.Store(math.Float64bits(f))
	l.tasks++
}

var _ scheduler.WorkerLink = (*rankLink)(nil)

// measureLinks pings each worker rank in turn (echoPings answers) and
// returns the links by rank (nil at root).
func measureLinks(ctx context.Context, c comm.Comm, root int) ([]*rankLink, error) {
	links := make([]*rankLink, c.Size())
	small, large := pingBuf(pingSmall), pingBuf(pingLarge)
	for r := range c.Size() {
		if r == root {
			continue
		}
		ts, err := fastestPing(ctx, c, r, small)
		if err != nil {
			return nil, fmt.Errorf("measuring the link to rank %d: %w", r, err)
		}
		tl, err := fastestPing(ctx, c, r, large)
		if err != nil {
			return nil, fmt.Errorf("measuring the link to rank %d: %w", r, err)
		}
		per := float64(tl-ts) / float64(2*(pingLarge-pingSmall))
		if per <= 0 {
			per = float64(tl) / float64(2*pingLarge) // faster than the clock sees
		}
		links[r] = newRankLink(float64(ts)/2, per)
	}
	return links, nil
}

// pingBuf returns a buffer of n bytes.
func pingBuf(n int) comm.Buf {
	return comm.Buf{Bytes: make([]byte, n), Type: comm.Uint8}
}

// fastestPing returns the fastest of pingRepeat round trips of b to rank
// r and back.
func fastestPing(ctx context.Context, c comm.Comm, r int, b comm.Buf) (time.Duration, error) {
	var best time.Duration
	for range pingRepeat {
		t0 := time.Now()
		if err := c.Send(ctx, b, r, pingTag); err != nil {
			return 0, fmt.Errorf("ping of %d bytes: %w", len(b.Bytes), err)
		}
		if _, err := c.Recv(ctx, b.Type, r, pingTag, func(int) ([]byte, error) { return b.Bytes, nil }); err != nil {
			return 0, fmt.Errorf("ping of %d bytes: %w", len(b.Bytes), err)
		}
		if d := time.Since(t0); best == 0 || d < best {
			best = d
		}
	}
	return best, nil
}

// echoPings answers the master's pings (measureLinks) on a worker rank.
func echoPings(ctx context.Context, c comm.Comm, root int) error {
	for _, n := range [...]int{pingSmall, pingLarge} {
		b := pingBuf(n) // one per size, as a slot keeps a task's buffers (slotBufs)
		for range pingRepeat {
			if _, err := c.Recv(ctx, b.Type, root, pingTag, func(int) ([]byte, error) { return b.Bytes, nil }); err != nil {
				return fmt.Errorf("answering the master's ping of %d bytes: %w", n, err)
			}
			if err := c.Send(ctx, b, root, pingTag); err != nil {
				return fmt.Errorf("answering the master's ping of %d bytes: %w", n, err)
			}
		}
	}
	return nil
}
