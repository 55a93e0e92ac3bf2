package local

import (
	"fmt"

	"github.com/pzgo/pz/comm"
)

// The data phase of a large collective is a set of queues of chunks, one
// queue per rank, that any rank may work on: a rank first takes chunks of
// its own queue, then those left in the others'. When every rank runs,
// each does about its own share, as with a static split; when some do not
// (more ranks than cores, or a machine busy with other work) the ranks
// that run do the work of those that wait for a core, instead of waiting
// for them. Each chunk is done exactly once, so data is still copied once.

// Chunk sizes of the data phase. Both are multiples of chunkAlign, so
// that two ranks never write one cache line and no element straddles two
// chunks; both are below 1 MiB, where Go's memmove switches to
// non-temporal stores (see copyChunk).
const (
	// copyShare is the chunk of a copy (Bcast, Gather, AllGather): big
	// enough that claiming it (an atomic add on a shared line, tens of
	// nanoseconds) is noise, small enough to balance 64 KiB over two
	// ranks.
	copyShare = 32 << 10
	// foldShare is the chunk of a reduction: a fold reads every rank's
	// source and writes every destination, so it does more work per byte.
	foldShare = 16 << 10
)

// share does the chunks of collective k's queues until none is left:
// count(d) is the number of chunks of rank d's queue and run(d, i) does
// chunk i of it. count must give every rank the same answer once the
// collective is committed. (Plain funcs, not an interface: closures that
// do not escape live on the stack, so share allocates nothing.)
//
// After the last chunk it waits until the other
// ranks have finished the chunks they took, so that on return every chunk
// is done. It must be called, once, by every rank that committed
// collective k: peers may still be copying to or from this rank's memory
// until it returns. It ignores contexts and broken state, like waitDepart:
// the remaining work is bounded and other ranks do it if this one cannot.
//
// A chunk can fail: run calls a user reduction (name is the call, user
// its op, nil for a copy), which may panic or exit its goroutine. The rank
// that ran it then closes every queue (see abandonShare), waits for the
// chunks the others are running, breaks the group and panics on (or
// exits); the others finish the chunks they hold, take no more, and
// return the group's error, which names that rank (the data phase is
// incomplete on every rank). A nil error means every chunk was done.
func (c *rankComm) share(k uint64, name string, user *comm.UserFunc, count func(d int) int, run func(d, i int)) error {
	g := c.g
	p := k & 1
	n := g.size
	var total, mine uint64
	finished := false
	defer func() {
		if !finished {
			c.abandonShare(k, name, user, count, mine, recover())
		}
	}()
	for i := range n {
		d := c.rank + i
		if d >= n {
			d -= n
		}
		m := uint64(count(d))
		total += m
		claim := &g.slots[d].a[p].claim
		// Load first: once a queue is exhausted, peers looking at it
		// should not keep writing its line.
		for claim.Load() < m {
			ch := claim.Add(1) - 1
			if ch >= m {
				break
			}
			run(d, int(ch))
			mine++
		}
	}
	finished = true
	if mine > 0 {
		g.slots[c.rank].a[p].done.Store(mine)
		g.wakeAll(c.rank)
	}
	w := cond{kind: condDone, k: k, target: total}
	_ = c.spinWait(nil, false, &w)
	if g.brk.err.Load() == nil {
		return nil
	}
	// Broken, perhaps by a later collective of a rank that finished this
	// one first: this one failed only if a rank gave up a chunk of it.
	for _, s := range g.slots {
		if s.a[p].done.Load()&doneFailed != 0 {
			return g.brk.broken()
		}
	}
	return nil
}

// doneFailed marks the done count of a rank that failed in collective k's
// data phase (see abandonShare).
const doneFailed = 1 << 63

// closedQueue is what abandonShare sets every claim counter of a failed
// data phase to: above any queue's length, so that no rank claims
// another chunk, and far from overflowing by the claims that follow.
const closedQueue = 1 << 62

// abandonShare is share's way out when a chunk this rank was running
// panicked (p, the recovered value) or exited its goroutine (p nil). The
// others still count chunks done to know when no rank touches their
// memory any more, so this rank accounts for every chunk that will never
// be done: it closes each queue, swapping its claim counter for
// closedQueue (chunks claimed before the swap are run by their claimers;
// the rest are abandoned), and stores as its done count the chunks it
// did, the one that failed and the abandoned ones, marked doneFailed.
// Then the sum of done counts reaches the total once the chunks still
// running end, as if all had been done. It breaks the group first, so
// that the others find the reason when they see the mark, waits for
// them, so that none still writes this rank's memory when its caller gets
// control back, and panics on with p.
func (c *rankComm) abandonShare(k uint64, name string, user *comm.UserFunc, count func(d int) int, mine uint64, p any) {
	g := c.g
	q := k & 1
	var total, gone uint64
	for d := range g.size {
		m := uint64(count(d))
		total += m
		if old := g.slots[d].a[q].claim.Swap(closedQueue); old < m {
			gone += m - old
		}
	}
	what := "the data phase of " + name
	if user != nil {
		what = fmt.Sprintf("user op %q of %s", user.Name, name)
	}
	how := fmt.Sprintf("panicked in %s: %v", what, p)
	if p == nil {
		how = "exited its goroutine (runtime.Goexit) in " + what
	}
	g.breakWith(fmt.Errorf("%w: rank %d %s; the others' results are incomplete", comm.ErrBroken, c.rank, how))
	g.slots[c.rank].a[q].done.Store((mine + 1 + gone) | doneFailed)
	g.wakeAll(c.rank)
	w := cond{kind: condDone, k: k, target: total}
	_ = c.spinWait(nil, false, &w)
	if p != nil {
		panic(p)
	}
}

// chunks is the number of chunks of size per in n bytes.
func chunks(n, per int) int { return (n + per - 1) / per }
