package local

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/pzgo/pz/comm"
)

// Collectives follow one protocol (see doc.go): publish args, arrive,
// agree, move data, depart. Who waits for whose departure depends on who
// reads or writes whose memory; the comments of each method say which.

// Barrier implements comm.Comm.
func (c *rankComm) Barrier(ctx context.Context) error {
	const call = comm.CallBarrier
	k, a, err := c.begin(ctx, call)
	if err != nil {
		return err
	}
	defer c.collMu.Unlock()
	a.fp = comm.Fingerprint{Call: call, Root: -1, Count: -1}
	return c.arrive(ctx, call, k)
}

// Bcast implements comm.Comm. Up to eagerMax bytes root copies its buffer
// into its slot and returns at once; non-roots copy from there. Above, the
// ranks share the copying (see share): every rank, root included, copies
// pieces of root's buffer straight into every non-root's buffer, and all
// wait until every piece is done.
func (c *rankComm) Bcast(ctx context.Context, buf comm.Buf, root int) error {
	const call = comm.CallBcast
	k, a, err := c.begin(ctx, call)
	if err != nil {
		return err
	}
	defer c.collMu.Unlock()
	g := c.g
	a.fp = comm.Fingerprint{Call: call, Type: buf.Type, Root: int32(root), Count: int64(buf.Len())}
	a.argErr = comm.FirstErr(comm.CheckBuf("Bcast", c.rank, buf), comm.CheckRoot("Bcast", c.rank, root, g.size))
	eager := len(buf.Bytes) <= eagerMax
	if c.rank == root && a.argErr == nil {
		a.contribute(buf.Bytes, eager)
	}
	a.dst = buf.Bytes
	if err := c.arrive(ctx, call, k); err != nil {
		return err
	}
	if eager {
		if c.rank != root {
			copy(buf.Bytes, g.slots[root].a[k&1].src)
		}
		return nil
	}
	if err := c.commit(ctx, call); err != nil {
		return err
	}
	// Rank d's queue is the d-th of g.size equal parts of root's buffer;
	// a piece is read once and written to every non-root while in L1.
	p := k & 1
	src := g.slots[root].a[p].src
	n := g.size
	err = c.share(k, "Bcast", nil, func(d int) int {
		lo, hi := chunk(len(src), n, d)
		return chunks(hi-lo, copyShare)
	}, func(d, i int) {
		lo, hi := chunk(len(src), n, d)
		lo += i * copyShare
		hi = min(lo+copyShare, hi)
		for j, s := range g.slots {
			if j != root {
				copy(s.a[p].dst[lo:hi], src[lo:hi])
			}
		}
	})
	return c.failed("Bcast", err)
}

// failed wraps err, the failure of a shared data phase (see share), as
// call's on this rank.
func (c *rankComm) failed(call string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("local: %s on rank %d: %w", call, c.rank, err)
}

// Reduce implements comm.Comm. Small buffers: non-roots contribute eager
// copies and root folds them. Large buffers: every rank folds a disjoint
// chunk of all send buffers straight into root's recv (see shareFold), so
// the work is spread over the ranks and no data is copied twice.
func (c *rankComm) Reduce(ctx context.Context, send, recv comm.Buf, op comm.Op, root int) error {
	return c.reduce(ctx, "Reduce", send, recv, reduction{op: op}, root)
}

// ReduceUser implements comm.Comm: Reduce's algorithm with the user's
// function.
func (c *rankComm) ReduceUser(ctx context.Context, send, recv comm.Buf, op *comm.UserFunc, root int) error {
	return c.reduce(ctx, "ReduceUser", send, recv, reduction{op: comm.User, user: op}, root)
}

// reduction is a predefined op, or comm.User and the user's function.
type reduction struct {
	op   comm.Op
	user *comm.UserFunc
}

// check validates the op for send.
func (r reduction) check(call string, rank int, send comm.Buf) error {
	if r.op == comm.User {
		return comm.CheckUser(call, rank, send, r.user)
	}
	return comm.FirstErr(comm.CheckBuf(call, rank, send), comm.CheckOp(call, rank, r.op, send.Type))
}

func (c *rankComm) reduce(ctx context.Context, name string, send, recv comm.Buf, red reduction, root int) error {
	const call = comm.CallReduce
	k, a, err := c.begin(ctx, call)
	if err != nil {
		return err
	}
	defer c.collMu.Unlock()
	g := c.g
	a.fp = comm.Fingerprint{Call: call, Type: send.Type, Op: red.op, Root: int32(root), Count: int64(send.Len())}
	a.argErr = comm.FirstErr(
		red.check(name, c.rank, send),
		comm.CheckRoot(name, c.rank, root, g.size))
	if a.argErr == nil && c.rank == root {
		a.argErr = comm.FirstErr(comm.CheckRecv(name, c.rank, send, recv), comm.CheckAlias(name, c.rank, send, recv))
	}
	small := len(send.Bytes) <= eagerMax
	if a.argErr == nil {
		if small && c.rank != root {
			a.src = a.eagerCopy(send.Bytes)
		} else {
			a.src = send.Bytes
		}
		if c.rank == root {
			a.dst = recv.Bytes
		}
	}
	if err := c.arrive(ctx, call, k); err != nil {
		return err
	}
	if small {
		if c.rank == root {
			c.fold(red, send.Type, k, 0, len(send.Bytes), root)
		}
		return nil
	}
	if err := c.commit(ctx, call); err != nil {
		return err
	}
	return c.failed(name, c.shareFold(name, red, send.Type, k, len(send.Bytes), root))
}

// AllReduce implements comm.Comm. Up to eagerMax bytes every rank copies
// its send buffer into its slot and folds all of them itself: one
// synchronization, no waiting for peers to finish. Above, each rank folds
// a disjoint chunk of every peer's send buffer (read in place) and writes
// the result into every peer's recv, block by block while it is in cache:
// each byte is read once and written once per rank, and the work is split
// evenly, with ranks that run taking over pieces of those that do not
// (see share). Every rank's result is bitwise identical: the fold is in rank
// order, ((s0 op s1) op s2) ..., and each element is computed once.
func (c *rankComm) AllReduce(ctx context.Context, send, recv comm.Buf, op comm.Op) error {
	return c.allReduce(ctx, "AllReduce", send, recv, reduction{op: op}, nil)
}

// AllReduceUser implements comm.Comm: AllReduce's algorithm with the
// user's function.
func (c *rankComm) AllReduceUser(ctx context.Context, send, recv comm.Buf, op *comm.UserFunc) error {
	return c.allReduce(ctx, "AllReduceUser", send, recv, reduction{op: comm.User, user: op}, nil)
}

// allReduce is AllReduce's algorithm (name is the call, for errors), or
// with loc AllReduceLocBuf's: its fingerprint, and its invalid argument
// before the reduction's.
func (c *rankComm) allReduce(ctx context.Context, name string, send, recv comm.Buf, red reduction, loc *locCall) error {
	call := comm.CallAllReduce
	if loc != nil {
		call = loc.fp.Call
	}
	k, a, err := c.begin(ctx, call)
	if err != nil {
		return err
	}
	defer c.collMu.Unlock()
	g := c.g
	a.fp = comm.Fingerprint{Call: call, Type: send.Type, Op: red.op, Root: -1, Count: int64(send.Len())}
	a.argErr = comm.FirstErr(
		red.check(name, c.rank, send),
		comm.CheckRecv(name, c.rank, send, recv),
		comm.CheckAlias(name, c.rank, send, recv))
	if loc != nil {
		a.fp = loc.fp
		if loc.argErr != nil {
			a.argErr = loc.argErr
		}
	}
	small := len(send.Bytes) <= eagerMax
	if a.argErr == nil {
		if small && g.size > 1 {
			a.src = a.eagerCopy(send.Bytes)
		} else {
			a.src = send.Bytes
		}
		a.dst = recv.Bytes
	}
	if err := c.arrive(ctx, call, k); err != nil {
		return err
	}
	if small {
		if r := g.sharedResult(k); r != nil {
			copy(recv.Bytes, r)
		} else if n := len(send.Bytes); n <= len(a.inline) && red.op != comm.User && g.size > 1 {
			c.foldInline(red.op, send.Type, k, recv.Bytes[:n])
		} else {
			c.fold(red, send.Type, k, 0, len(send.Bytes), toSelf)
		}
		return nil
	}
	if err := c.commit(ctx, call); err != nil {
		return err
	}
	return c.failed(name, c.shareFold(name, red, send.Type, k, len(send.Bytes), toAll))
}

// foldInline folds collective k's contributions of len(dst) <= 32 bytes,
// which every rank copied into its args' inline bytes (eagerCopy), into
// dst from the left with a predefined op: each peer's contribution is on
// the line that told this rank it arrived.
func (c *rankComm) foldInline(op comm.Op, dt comm.Datatype, k uint64, dst []byte) {
	sl, p := c.g.slots, k&1
	_ = comm.ReduceTo(op, dt, dst, sl[0].a[p].contribution(), sl[1].a[p].contribution())
	for j := 2; j < len(sl); j++ {
		_ = comm.ReduceTo(op, dt, dst, dst, sl[j].a[p].contribution())
	}
}

// shareFold folds the total bytes of collective k into the destination of
// rank `to` (or every rank's, toAll), the work shared among the ranks:
// rank d's queue is the d-th of g.size equal chunks, cut in pieces of
// foldShare bytes. name is the call, for errors.
func (c *rankComm) shareFold(name string, red reduction, dt comm.Datatype, k uint64, total, to int) error {
	n := c.g.size
	return c.share(k, name, red.user, func(d int) int {
		lo, hi := chunk(total, n, d)
		return chunks(hi-lo, foldShare)
	}, func(d, i int) {
		lo, hi := chunk(total, n, d)
		lo += i * foldShare
		c.fold(red, dt, k, lo, min(lo+foldShare, hi), to)
	})
}

// Destinations of fold besides a root rank.
const (
	toAll    = -1 // every rank's dst
	toSelf   = -2 // this rank's dst only
	toResult = -3 // the group's result buffer (see makeResult)
)

// makeResult is the releaser's part of a small AllReduce with a
// predefined op, or an AllGather of eager copies, in a counted group: it
// folds or concatenates the ranks' eager copies once into g.result[k&1],
// which every rank then copies whole, instead of each rank folding or
// copying all n of them (n² small copies at large n). A user op is folded
// by each rank, where a panic in the user's function belongs. It runs
// before the release, so the ranks see the result; the buffer of k is
// next written at k+2, after every rank arrived at k+1 and so finished
// copying it.
func (c *rankComm) makeResult(k uint64) {
	g := c.g
	p := k & 1
	a := &g.slots[0].a[p]
	g.made[p] = false
	if g.size < 2 {
		return
	}
	total := 0
	switch a.fp.Call {
	case comm.CallAllReduce:
		if a.fp.Op == comm.User || len(a.src) > eagerMax {
			return
		}
		total = len(a.src)
	case comm.CallAllGather:
		if g.anyDirect(k) {
			return
		}
		for _, s := range g.slots {
			total += len(s.a[p].src)
		}
	default:
		return
	}
	if cap(g.result[p]) < total {
		g.result[p] = make([]byte, total, max(total, 64))
	}
	g.result[p] = g.result[p][:total]
	g.made[p] = true
	if a.fp.Call == comm.CallAllGather {
		c.gatherInto(k, g.result[p], 0, total)
		return
	}
	c.fold(reduction{op: a.fp.Op}, a.fp.Type, k, 0, total, toResult)
}

// sharedResult returns the result makeResult made for collective k, or
// nil when it made none (a watched group, a user op, a large buffer):
// then each rank computes its own. The releaser wrote it before releasing
// k, which every rank has seen by now.
func (g *group) sharedResult(k uint64) []byte {
	if !g.counted || !g.made[k&1] {
		return nil
	}
	return g.result[k&1]
}

// fold reduces bytes [lo, hi) of every rank's src for collective k, in
// rank order, and writes the result to the dst of rank `to` (or see toAll,
// toSelf). A predefined op folds from the left, ((s0 op s1) op s2) ...; a
// user op from the right, s0 ⊕ (s1 ⊕ (... ⊕ s(n-1))), since its function
// combines into its second operand: the same value for an associative op,
// and no operand is copied.
func (c *rankComm) fold(red reduction, dt comm.Datatype, k uint64, lo, hi, to int) {
	if lo >= hi {
		return
	}
	p := k & 1
	sl := c.g.slots
	n := len(sl)
	var dst0 []byte
	switch to {
	case toResult:
		dst0 = c.g.result[p]
	case toAll, toSelf:
		dst0 = sl[c.rank].a[p].dst
	default:
		dst0 = sl[to].a[p].dst
	}
	// ReduceTo may write into its first or second operand, but folding into
	// dst0 is wrong when dst0 is also a later operand (in place on rank >=
	// 2): then fold into scratch and copy.
	// A user op's right fold first copies s(n-1) into dst0: wrong when
	// dst0 is any earlier operand.
	first, last := 2, n
	if red.op == comm.User {
		first, last = 0, n-1
	}
	alias := false
	for j := first; j < last; j++ {
		if comm.Overlaps(dst0[lo:hi], sl[j].a[p].src[lo:hi]) {
			alias = true
			break
		}
	}
	for off := lo; off < hi; off += blockBytes {
		end := min(off+blockBytes, hi)
		acc := dst0[off:end]
		if alias {
			acc = c.scratchBuf()[:end-off]
		}
		switch {
		case n == 1:
			copy(acc, sl[0].a[p].src[off:end])
		case red.op == comm.User:
			copy(acc, sl[n-1].a[p].src[off:end])
			for j := n - 2; j >= 0; j-- {
				red.user.Fn(sl[j].a[p].src[off:end], acc)
			}
		default:
			// The arguments were validated in the agreement step.
			_ = comm.ReduceTo(red.op, dt, acc, sl[0].a[p].src[off:end], sl[1].a[p].src[off:end])
			for j := 2; j < n; j++ {
				_ = comm.ReduceInto(red.op, dt, acc, sl[j].a[p].src[off:end])
			}
		}
		if alias {
			copy(dst0[off:end], acc)
		}
		if to == toAll {
			for j := range sl {
				if j != c.rank {
					copy(sl[j].a[p].dst[off:end], acc)
				}
			}
		}
	}
}

func (c *rankComm) scratchBuf() []byte {
	if c.scratch == nil {
		c.scratch = make([]byte, blockBytes)
	}
	return c.scratch
}

// chunk returns rank r's share [lo, hi) of total bytes split n ways, with
// boundaries on chunkAlign.
func chunk(total, n, r int) (lo, hi int) {
	per := (total + n - 1) / n
	per = (per + chunkAlign - 1) &^ (chunkAlign - 1)
	lo = min(r*per, total)
	return lo, min(lo+per, total)
}

// allocBuf calls alloc for count elements of dt and checks its size.
func (c *rankComm) allocBuf(call comm.Call, alloc comm.Alloc, count int, dt comm.Datatype) ([]byte, error) {
	b := alloc(count)
	want := count * dt.Size()
	if len(b) < want {
		return nil, fmt.Errorf("local: %v on rank %d: %w: Alloc(%d) returned %d bytes, want %d", call, c.rank, comm.ErrInvalidArg, count, len(b), want)
	}
	return b[:want], nil
}

// Gather implements comm.Comm. When every non-root's contribution fits in
// eagerMax bytes, non-roots copy it into their slots and return at once,
// and root copies the copies. Otherwise root allocates the result before
// the commit and publishes it, and all ranks share the copying into it
// (see share): each byte is copied once, straight from its owner's send
// buffer.
func (c *rankComm) Gather(ctx context.Context, send comm.Buf, root int, alloc comm.Alloc) ([]int, error) {
	const call = comm.CallGather
	k, a, err := c.begin(ctx, call)
	if err != nil {
		return nil, err
	}
	defer c.collMu.Unlock()
	g := c.g
	a.fp = comm.Fingerprint{Call: call, Type: send.Type, Root: int32(root), Count: -1}
	a.argErr = comm.FirstErr(comm.CheckBuf("Gather", c.rank, send), comm.CheckRoot("Gather", c.rank, root, g.size))
	if a.argErr == nil && c.rank == root {
		a.argErr = comm.CheckAlloc("Gather", c.rank, alloc)
	}
	eager := len(send.Bytes) <= eagerMax && c.rank != root
	if a.argErr == nil {
		a.contribute(send.Bytes, eager)
		a.direct = a.direct && c.rank != root // root's part is copied by root itself
	}
	if err := c.arrive(ctx, call, k); err != nil {
		return nil, err
	}
	if !g.anyDirect(k) {
		if c.rank != root {
			return nil, nil
		}
		counts, total := c.counts(send.Type, k)
		out, err := c.allocBuf(call, alloc, total, send.Type)
		if err != nil {
			return nil, err
		}
		c.gatherInto(k, out, 0, len(out))
		return counts, nil
	}
	var counts []int
	var aerr error
	if c.rank == root {
		counts, a.dst, aerr = c.allocResult(call, alloc, send.Type, k)
	}
	if err := c.commit(ctx, call); err != nil {
		return nil, err
	}
	if err := c.shareGather("Gather", k, root); err != nil {
		return nil, c.failed("Gather", err)
	}
	if c.rank != root || aerr != nil {
		return nil, aerr
	}
	return counts, nil
}

// counts returns the element count of every rank's src for collective k
// and their sum.
func (c *rankComm) counts(dt comm.Datatype, k uint64) ([]int, int) {
	p := k & 1
	sl := c.g.slots
	size := dt.Size()
	counts := make([]int, len(sl))
	total := 0
	for j := range sl {
		counts[j] = len(sl[j].a[p].contribution()) / size
		total += counts[j]
	}
	return counts, total
}

// allocResult returns the counts of collective k and the buffer for the
// concatenation of every rank's src, from alloc, or a nil buffer and the
// error if alloc's is too short. It runs between arrival and commit,
// where the peers wait for this rank's commit: if alloc panics (or calls
// runtime.Goexit) it breaks the group, so that they fail instead of
// waiting, and lets the panic go on.
func (c *rankComm) allocResult(call comm.Call, alloc comm.Alloc, dt comm.Datatype, k uint64) (counts []int, out []byte, err error) {
	counts, total := c.counts(dt, k)
	returned := false
	defer func() {
		if !returned {
			c.g.breakWith(fmt.Errorf("%w: rank %d: Alloc of %v did not return", comm.ErrBroken, c.rank, call))
			c.g.wakeAll(c.rank)
		}
	}()
	out, err = c.allocBuf(call, alloc, total, dt)
	returned = true
	return counts, out, err
}

// gatherInto copies bytes [lo, hi) of the concatenation, in rank order, of
// every rank's src for collective k into the same bytes of out.
func (c *rankComm) gatherInto(k uint64, out []byte, lo, hi int) {
	p := k & 1
	off := 0
	for _, s := range c.g.slots {
		src := s.a[p].contribution()
		end := off + len(src)
		if end > lo && off < hi {
			a, b := max(lo, off), min(hi, end)
			copy(out[a:b], src[a-off:b-off])
		}
		if end >= hi {
			return
		}
		off = end
	}
}

// shareGather copies every rank's src for collective k into the dst of
// rank `to` (or of every rank, toAll), in rank order, sharing the work
// among the ranks. Rank d's queue is its own src: a piece of it is read
// once, from this rank's cache when the owner does it, and written to
// every destination while it is in L1 (pulling every source into one's
// own result instead reads each byte once per destination). A rank whose
// dst is nil (its Alloc failed) is skipped. name is the call, for errors.
func (c *rankComm) shareGather(name string, k uint64, to int) error {
	p := k & 1
	sl := c.g.slots
	return c.share(k, name, nil, func(d int) int {
		return chunks(len(sl[d].a[p].src), copyShare)
	}, func(d, i int) {
		off := 0
		for _, s := range sl[:d] {
			off += len(s.a[p].src)
		}
		src := sl[d].a[p].src
		lo := i * copyShare
		piece := src[lo:min(lo+copyShare, len(src))]
		off += lo
		if to != toAll {
			if dst := sl[to].a[p].dst; dst != nil {
				copy(dst[off:], piece)
			}
			return
		}
		for _, s := range sl {
			if dst := s.a[p].dst; dst != nil {
				copy(dst[off:], piece)
			}
		}
	})
}

// AllGather implements comm.Comm. When every contribution fits in
// eagerMax bytes, each rank copies it into its slot, and then every rank
// copies the copies into its own result: one synchronization. Otherwise
// every rank allocates its result before the commit and publishes it, and
// the ranks share the copying (see share): each byte goes once, straight
// from its owner's send buffer, into each result.
func (c *rankComm) AllGather(ctx context.Context, send comm.Buf, alloc comm.Alloc) ([]int, error) {
	return c.allGather(ctx, send, -1, comm.CheckAlloc("AllGather", c.rank, alloc), alloc)
}

// AllGatherBlockBuf implements comm.AllGatherBlockComm: an AllGather whose
// fingerprint holds the count, so that a rank passing another length is a
// *comm.MismatchError on every rank (as comm/mpi's agreement step makes
// it), and whose result is recv. send may be this rank's block of recv:
// the copy of that block onto itself moves nothing.
func (c *rankComm) AllGatherBlockBuf(ctx context.Context, send, recv comm.Buf) error {
	_, argErr := comm.CheckBlocks("AllGather", c.rank, c.g.size, send, recv)
	_, err := c.allGather(ctx, send, int64(send.Len()), argErr, func(int) []byte { return recv.Bytes })
	return err
}

var _ comm.AllGatherBlockComm = (*rankComm)(nil)

// allGather is AllGather with count in the fingerprint (-1: counts may
// differ) and argErr, an error in this rank's other arguments.
func (c *rankComm) allGather(ctx context.Context, send comm.Buf, count int64, argErr error, alloc comm.Alloc) ([]int, error) {
	const call = comm.CallAllGather
	k, a, err := c.begin(ctx, call)
	if err != nil {
		return nil, err
	}
	defer c.collMu.Unlock()
	a.fp = comm.Fingerprint{Call: call, Type: send.Type, Root: -1, Count: count}
	a.argErr = comm.FirstErr(comm.CheckBuf("AllGather", c.rank, send), argErr)
	eager := len(send.Bytes) <= eagerMax && c.g.size > 1
	if a.argErr == nil {
		a.contribute(send.Bytes, eager)
	}
	if err := c.arrive(ctx, call, k); err != nil {
		return nil, err
	}
	if !c.g.anyDirect(k) {
		counts, total := c.counts(send.Type, k)
		out, err := c.allocBuf(call, alloc, total, send.Type)
		if err != nil {
			return nil, err
		}
		if r := c.g.sharedResult(k); r != nil {
			copy(out, r)
		} else {
			c.gatherInto(k, out, 0, len(out))
		}
		return counts, nil
	}
	counts, out, aerr := c.allocResult(call, alloc, send.Type, k)
	a.dst = out
	if err := c.commit(ctx, call); err != nil {
		return nil, err
	}
	if err := c.shareGather("AllGather", k, toAll); err != nil {
		return nil, c.failed("AllGather", err)
	}
	if aerr != nil {
		return nil, aerr
	}
	return counts, nil
}

// prefix fills a.offs with the prefix sums of counts (len(counts)+1
// entries), reusing its memory.
func (a *args) prefix(counts []int) {
	a.offs = a.offs[:0]
	sum := 0
	a.offs = append(a.offs, 0)
	for _, n := range counts {
		sum += n
		a.offs = append(a.offs, sum)
	}
}

// Scatter implements comm.Comm. Every rank copies its part from root's
// buffer (or root's eager copy, up to eagerMax bytes); root waits for them
// in the first case. send.Type must be set on every rank; send.Bytes and
// counts are read on root only.
func (c *rankComm) Scatter(ctx context.Context, send comm.Buf, counts []int, root int, alloc comm.Alloc) error {
	const call = comm.CallScatter
	k, a, err := c.begin(ctx, call)
	if err != nil {
		return err
	}
	defer c.collMu.Unlock()
	g := c.g
	a.fp = comm.Fingerprint{Call: call, Type: send.Type, Root: int32(root), Count: -1}
	isRoot := c.rank == root
	if isRoot {
		a.argErr = comm.FirstErr(comm.CheckBuf("Scatter", c.rank, send), comm.CheckRoot("Scatter", c.rank, root, g.size),
			comm.CheckCounts("Scatter", c.rank, counts, g.size, send.Len()), comm.CheckAlloc("Scatter", c.rank, alloc))
	} else {
		a.argErr = comm.FirstErr(comm.CheckBuf("Scatter", c.rank, comm.Buf{Type: send.Type}), comm.CheckRoot("Scatter", c.rank, root, g.size),
			comm.CheckAlloc("Scatter", c.rank, alloc))
	}
	eager := isRoot && len(send.Bytes) <= eagerMax
	if isRoot && a.argErr == nil {
		a.prefix(counts)
		a.contribute(send.Bytes, eager)
	}
	if err := c.arrive(ctx, call, k); err != nil {
		return err
	}
	if g.anyDirect(k) {
		if err := c.commit(ctx, call); err != nil {
			return err
		}
		if isRoot {
			defer c.waitDepart(k, -1)
		} else {
			defer c.depart(k)
		}
	}
	rs := &g.slots[root].a[k&1]
	size := send.Type.Size()
	lo, hi := rs.offs[c.rank], rs.offs[c.rank+1]
	out, err := c.allocBuf(call, alloc, hi-lo, send.Type)
	if err != nil {
		return err
	}
	copyBytes(out, rs.src[lo*size:hi*size])
	return nil
}

// Alltoall implements comm.Comm. Every rank copies its part of every
// peer's buffer; ranks contributing more than eagerMax bytes wait until
// all have.
func (c *rankComm) Alltoall(ctx context.Context, send comm.Buf, sendCounts []int, alloc comm.Alloc) ([]int, error) {
	const call = comm.CallAlltoall
	k, a, err := c.begin(ctx, call)
	if err != nil {
		return nil, err
	}
	defer c.collMu.Unlock()
	g := c.g
	a.fp = comm.Fingerprint{Call: call, Type: send.Type, Root: -1, Count: -1}
	a.argErr = comm.FirstErr(comm.CheckBuf("Alltoall", c.rank, send), comm.CheckCounts("Alltoall", c.rank, sendCounts, g.size, send.Len()),
		comm.CheckAlloc("Alltoall", c.rank, alloc))
	eager := len(send.Bytes) <= eagerMax && g.size > 1
	if a.argErr == nil {
		a.prefix(sendCounts)
		a.contribute(send.Bytes, eager)
	}
	if err := c.arrive(ctx, call, k); err != nil {
		return nil, err
	}
	if c.g.anyDirect(k) {
		if err := c.commit(ctx, call); err != nil {
			return nil, err
		}
		// Also if alloc panics: the others must not hang.
		defer func() {
			c.depart(k)
			if !eager {
				c.waitDepart(k, -1)
			}
		}()
	}
	p := k & 1
	size := send.Type.Size()
	recvCounts := make([]int, g.size)
	total := 0
	for j := range g.slots {
		o := g.slots[j].a[p].offs
		recvCounts[j] = o[c.rank+1] - o[c.rank]
		total += recvCounts[j]
	}
	out, err := c.allocBuf(call, alloc, total, send.Type)
	if err != nil {
		return nil, err
	}
	off := 0
	for j := range g.slots {
		aj := &g.slots[j].a[p]
		off += copyBytes(out[off:], aj.src[aj.offs[c.rank]*size:aj.offs[c.rank+1]*size])
	}
	return recvCounts, nil
}

// splitKey identifies one new communicator of one Split call.
type splitKey struct {
	seq   uint64
	color int
}

// splitEntry is a new communicator being picked up by its members.
type splitEntry struct {
	g      *group
	joined int
}

// Split implements comm.Comm. The first member of each color to get there
// creates the new group; the others find it in the parent's table, and the
// last one removes the entry.
func (c *rankComm) Split(ctx context.Context, color, key int) (comm.Comm, error) {
	return c.split(ctx, comm.CallSplit, color, key)
}

// Dup implements comm.Comm: a Split in which every rank keeps its place.
func (c *rankComm) Dup(ctx context.Context) (comm.Comm, error) {
	return c.split(ctx, comm.CallDup, 0, c.rank)
}

func (c *rankComm) split(ctx context.Context, call comm.Call, color, key int) (comm.Comm, error) {
	k, a, err := c.begin(ctx, call)
	if err != nil {
		return nil, err
	}
	defer c.collMu.Unlock()
	g := c.g
	a.fp = comm.Fingerprint{Call: call, Root: -1, Count: -1}
	a.argErr = comm.CheckSplit(call.String(), c.rank, color, key)
	a.color, a.key = color, key
	if err := c.arrive(ctx, call, k); err != nil {
		return nil, err
	}
	if color == comm.Undefined {
		return nil, nil
	}
	p := k & 1
	var members []int
	for j := range g.slots {
		if g.slots[j].a[p].color == color {
			members = append(members, j)
		}
	}
	slices.SortStableFunc(members, func(x, y int) int {
		return cmp.Compare(g.slots[x].a[p].key, g.slots[y].a[p].key)
	})
	newRank := slices.Index(members, c.rank)
	sk := splitKey{seq: k, color: color}
	g.splitMu.Lock()
	e := g.splits[sk]
	if e == nil {
		wr := make([]int, len(members))
		for i, m := range members {
			wr[i] = g.worldRanks[m]
		}
		e = &splitEntry{g: newGroup(g.w, wr, nil)}
		g.splits[sk] = e
	}
	e.joined++
	if e.joined == len(members) {
		delete(g.splits, sk)
	}
	g.splitMu.Unlock()
	return &rankComm{g: e.g, rank: newRank}, nil
}

// Compare implements comm.Compare: the groups' world ranks decide.
func (c *rankComm) Compare(other comm.Comm) (comm.Relation, error) {
	o, ok := other.(*rankComm)
	if !ok || o.g.w != c.g.w {
		return comm.Unequal, fmt.Errorf("%w: Compare: %T is not a communicator of this in-process world", comm.ErrInvalidArg, other)
	}
	// A freed communicator has no group left to compare (MPI_Comm_compare
	// refuses its handle): the same error on both backends.
	for _, x := range []struct {
		which string
		c     *rankComm
	}{{"the first", c}, {"the second", o}} {
		if x.c.freed.Load() {
			return comm.Unequal, fmt.Errorf("local: Compare on rank %d: %s communicator: %w (compare before Free)", c.rank, x.which, comm.ErrFreed)
		}
	}
	switch {
	case o.g == c.g:
		return comm.Ident, nil
	case slices.Equal(c.g.worldRanks, o.g.worldRanks):
		return comm.Congruent, nil
	}
	a, b := slices.Clone(c.g.worldRanks), slices.Clone(o.g.worldRanks)
	slices.Sort(a)
	slices.Sort(b)
	if slices.Equal(a, b) {
		return comm.Similar, nil
	}
	return comm.Unequal, nil
}

// ScanBuf implements comm.ScanComm. Up to eagerMax bytes every rank copies
// its send buffer into its slot, and rank r folds the copies of ranks 0..r
// (0..r-1 when exclusive) into its recv: one synchronization. Above, the
// ranks read each other's send buffers in place after a commit, and each
// waits until every rank has finished reading before it returns. The fold
// is from the left in rank order, as comm.Scan's fallback folds.
func (c *rankComm) ScanBuf(ctx context.Context, send, recv comm.Buf, op comm.Op, exclusive bool) error {
	call := comm.CallScan
	if exclusive {
		call = comm.CallExscan
	}
	k, a, err := c.begin(ctx, call)
	if err != nil {
		return err
	}
	defer c.collMu.Unlock()
	a.fp = comm.Fingerprint{Call: call, Type: send.Type, Op: op, Root: -1, Count: int64(send.Len())}
	a.argErr = comm.FirstErr(
		comm.CheckBuf(call.String(), c.rank, send),
		comm.CheckOp(call.String(), c.rank, op, send.Type),
		comm.CheckRecv(call.String(), c.rank, send, recv),
		comm.CheckAlias(call.String(), c.rank, send, recv))
	eager := len(send.Bytes) <= eagerMax
	if a.argErr == nil {
		a.contribute(send.Bytes, eager)
	}
	if err := c.arrive(ctx, call, k); err != nil {
		return err
	}
	last := c.rank
	if exclusive {
		last--
	}
	if eager {
		if last >= 0 {
			c.foldPrefix(op, send.Type, k, last, recv.Bytes[:len(send.Bytes)])
		}
		return nil
	}
	if err := c.commit(ctx, call); err != nil {
		return err
	}
	// Ranks after this one read its send buffer until they depart: in
	// place, the prefix waits in scratch until they have.
	dst := recv.Bytes[:len(send.Bytes)]
	inPlace := comm.Overlaps(dst, send.Bytes)
	if inPlace && last >= 0 {
		dst = make([]byte, len(send.Bytes))
	}
	if last >= 0 {
		c.foldPrefix(op, send.Type, k, last, dst)
	}
	c.depart(k)
	c.waitDepart(k, -1)
	if inPlace && last >= 0 {
		copy(recv.Bytes, dst)
	}
	return nil
}

// foldPrefix folds the srcs of ranks 0..last of collective k into dst,
// from the left: ((s0 op s1) op s2) ... The arguments were validated in
// the agreement step; dst is none of the srcs.
func (c *rankComm) foldPrefix(op comm.Op, dt comm.Datatype, k uint64, last int, dst []byte) {
	sl, p := c.g.slots, k&1
	if last == 0 {
		copy(dst, sl[0].a[p].src)
		return
	}
	_ = comm.ReduceTo(op, dt, dst, sl[0].a[p].src, sl[1].a[p].src)
	for j := 2; j <= last; j++ {
		_ = comm.ReduceInto(op, dt, dst, sl[j].a[p].src)
	}
}
