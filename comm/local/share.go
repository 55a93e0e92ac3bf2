package local

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
func (c *rankComm) share(k uint64, count func(d int) int, run func(d, i int)) {
	g := c.g
	p := k & 1
	n := g.size
	var total, mine uint64
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
	if mine > 0 {
		g.slots[c.rank].a[p].done.Store(mine)
		g.wakeAll(c.rank)
	}
	w := cond{kind: condDone, k: k, target: total}
	_ = c.spinWait(nil, &w)
}

// chunks is the number of chunks of size per in n bytes.
func chunks(n, per int) int { return (n + per - 1) / per }
