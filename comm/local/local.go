package local

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/pzgo/pz/comm"
)

// Tuning constants. They were chosen with the benchmarks in this package on
// a 2-core machine; see docs/performance.md.
const (
	// eagerMax is the largest contribution (bytes) that a rank copies into
	// its slot before arriving, so that it need not wait for the others to
	// finish reading its buffer. Above it, peers read the caller's memory
	// directly (zero extra copies) and the owner waits for them.
	eagerMax = 4096
	// blockBytes is the unit of the parallel reduction: a rank folds one
	// block of every peer's send buffer while it stays in L1, then copies
	// the block's result to every destination.
	blockBytes = 8192
	// chunkAlign aligns the chunk boundaries of the parallel reduction so
	// that two ranks never write the same cache line (64 bytes), and every
	// element (at most 16 bytes) lies in one chunk.
	chunkAlign = 64
	// spinLoads and spinYields bound the busy wait before a rank parks:
	// a short spin catches peers that arrive within about a microsecond,
	// the yields let other ranks run when there are more ranks than cores,
	// and parking keeps a waiting rank from burning a core.
	spinLoads  = 200
	spinYields = 20
)

// brokenBit marks a group's arrival counter once a rank abandoned a
// collective. It is set with a compare-and-swap only while the current
// collective has not yet collected every arrival, so each collective is
// either committed (all ranks proceed) or broken (all ranks fail).
const brokenBit = 1 << 63

// New returns a world of n in-process ranks: element i is rank i's
// communicator. Each rank's Comm must be used by that rank's goroutines
// only; collectives on one Comm must not run concurrently. Run starts the
// goroutines for you and handles failures; use New to manage them
// yourself.
func New(n int) ([]comm.Comm, error) {
	if n < 1 {
		return nil, fmt.Errorf("local: world of %d ranks: %w", n, comm.ErrInvalidArg)
	}
	w := &world{closed: make(chan struct{})}
	close(w.closed)
	w.brk.init()
	g := newGroup(w, n)
	out := make([]comm.Comm, n)
	for r := range n {
		out[r] = &rankComm{g: g, rank: r}
	}
	return out, nil
}

// world is what all communicators derived from one New share.
type world struct {
	brk    breaker       // broken by Abort or by Run when a rank fails
	closed chan struct{} // always closed: the done channel of completed requests
}

// breaker records the first reason a world or group became unusable.
type breaker struct {
	once sync.Once
	ch   chan struct{} // closed when broken
	err  atomic.Pointer[error]
}

func (b *breaker) init() { b.ch = make(chan struct{}) }

// breakWith marks b broken with err unless it already is.
func (b *breaker) breakWith(err error) {
	b.once.Do(func() {
		b.err.Store(&err)
		close(b.ch)
	})
}

// broken returns the reason b is broken, or nil.
func (b *breaker) broken() error {
	if p := b.err.Load(); p != nil {
		return *p
	}
	return nil
}

// group is one communicator, shared by its ranks.
type group struct {
	w       *world
	size    int
	slots   []slot
	boxes   []mailbox
	arrived atomic.Uint64 // collective arrivals, plus brokenBit
	brk     breaker

	splitMu sync.Mutex
	splits  map[splitKey]*splitEntry
}

func newGroup(w *world, n int) *group {
	g := &group{w: w, size: n, slots: make([]slot, n), boxes: make([]mailbox, n), splits: map[splitKey]*splitEntry{}}
	g.brk.init()
	for i := range g.slots {
		g.slots[i].wake = make(chan struct{}, 1)
	}
	return g
}

// slot is one rank's area of a group. The owner writes args[k&1] (and its
// eager buffer) before arriving at collective k; the others read them after
// the arrival counter commits k. Two copies suffice: a rank can only reach
// k+2 after every rank arrived at k+1, i.e. finished k.
type slot struct {
	arrive  atomic.Uint64 // last collective this rank arrived at (for diagnostics)
	depart  atomic.Uint64 // last collective this rank finished moving data for
	waiting atomic.Uint32 // 1 while the owner is parked
	wake    chan struct{} // capacity 1; a token means "re-check"
	a       [2]args
	_       [64]byte // keep neighbouring slots off each other's cache lines
}

// args is what one rank contributes to one collective.
type args struct {
	fp     comm.Fingerprint
	argErr error
	src    []byte // the rank's contribution: the caller's memory or its eager copy
	dst    []byte // the rank's receive buffer, written by peers (Reduce, AllReduce)
	offs   []int  // prefix sums of per-rank counts (Scatter, Alltoall)
	eager  []byte // owner's eager copy buffer for this parity
	color  int
	key    int
}

// rankComm is one rank's handle on a group; it implements comm.Comm.
type rankComm struct {
	g       *group
	rank    int
	seq     uint64 // collectives entered on this communicator
	freed   atomic.Bool
	scratch []byte // blockBytes of scratch for reductions that alias
}

var _ comm.Comm = (*rankComm)(nil)

// Rank implements comm.Comm.
func (c *rankComm) Rank() int { return c.rank }

// Size implements comm.Comm.
func (c *rankComm) Size() int { return c.g.size }

// usable returns why c cannot be used, or nil.
func (c *rankComm) usable() error {
	if c.freed.Load() {
		return comm.ErrFreed
	}
	if err := c.g.w.brk.broken(); err != nil {
		return err
	}
	return c.g.brk.broken()
}

// begin starts collective call: it checks that c is usable and ctx alive
// and returns the collective's sequence number and this rank's args slot.
// A ctx that is already done abandons the collective: the other ranks
// cannot complete it without this one, so the group is broken.
func (c *rankComm) begin(ctx context.Context, call comm.Call) (uint64, *args, error) {
	if err := c.usable(); err != nil {
		return 0, nil, fmt.Errorf("local: %v on rank %d: %w", call, c.rank, err)
	}
	c.seq++
	k := c.seq
	if err := ctx.Err(); err != nil {
		return 0, nil, c.abandon(call, k, context.Cause(ctx))
	}
	a := &c.g.slots[c.rank].a[k&1]
	a.argErr = nil
	a.src, a.dst = nil, nil
	return k, a, nil
}

// eagerCopy copies b into the slot's eager buffer for collective k.
func (a *args) eagerCopy(b []byte) []byte {
	if cap(a.eager) < len(b) {
		a.eager = make([]byte, max(len(b), 256))
	}
	e := a.eager[:len(b)]
	copy(e, b)
	return e
}

// arrive publishes this rank's args for collective k and waits until every
// rank has arrived or the collective is abandoned. Then it checks the
// ranks' arguments agree. A nil error means the data phase may start.
func (c *rankComm) arrive(ctx context.Context, call comm.Call, k uint64) error {
	g := c.g
	g.slots[c.rank].arrive.Store(k)
	target := k * uint64(g.size)
	v := g.arrived.Add(1)
	switch {
	case v&brokenBit != 0:
		return c.brokenErr(call)
	case v == target:
		// Last to arrive: wake whoever parked.
		g.wakeAll(c.rank)
	case v < target:
		if err := c.waitArrivals(ctx, call, k, target); err != nil {
			return err
		}
	}
	return g.agree(k)
}

// waitArrivals waits until the arrival counter reaches target.
func (c *rankComm) waitArrivals(ctx context.Context, call comm.Call, k, target uint64) error {
	g := c.g
	me := &g.slots[c.rank]
	for i := 0; ; i++ {
		v := g.arrived.Load()
		if v&brokenBit != 0 {
			return c.brokenErr(call)
		}
		if v >= target {
			return nil
		}
		if i < spinLoads {
			continue
		}
		if i < spinLoads+spinYields {
			runtime.Gosched()
			continue
		}
		me.waiting.Store(1)
		if v := g.arrived.Load(); v >= target || v&brokenBit != 0 {
			me.waiting.Store(0)
			continue
		}
		var cause error
		select {
		case <-me.wake:
		case <-ctx.Done():
			cause = context.Cause(ctx)
		case <-g.brk.ch:
		case <-g.w.brk.ch:
			cause = g.w.brk.broken()
		}
		me.waiting.Store(0)
		if cause != nil {
			if err := c.abandon(call, k, cause); err != nil {
				return err
			}
			return nil // committed meanwhile: take part normally
		}
	}
}

// abandon gives up collective k because of cause (a context error or the
// world breaking). If every rank has already arrived the collective is
// committed and abandon returns nil: the caller must take part, since
// peers may already be reading its buffers. Otherwise it breaks the group
// so that every other rank fails instead of waiting forever, and returns
// an error naming the ranks that had not arrived.
func (c *rankComm) abandon(call comm.Call, k uint64, cause error) error {
	g := c.g
	target := k * uint64(g.size)
	for {
		v := g.arrived.Load()
		if v&brokenBit != 0 {
			return fmt.Errorf("%w (while abandoning: %w)", c.brokenErr(call), cause)
		}
		if v >= target {
			return nil
		}
		if g.arrived.CompareAndSwap(v, v|brokenBit) {
			missing := g.missing(k)
			g.brk.breakWith(fmt.Errorf("%w: rank %d abandoned %v: %w", comm.ErrBroken, c.rank, call, cause))
			return fmt.Errorf("local: %v on rank %d: ranks %v had not arrived: %w", call, c.rank, missing, cause)
		}
	}
}

// missing lists the ranks that have not arrived at collective k.
func (g *group) missing(k uint64) []int {
	var out []int
	for j := range g.slots {
		if g.slots[j].arrive.Load() < k {
			out = append(out, j)
		}
	}
	return out
}

// brokenErr is the error for a call on a broken group or world.
func (c *rankComm) brokenErr(call comm.Call) error {
	err := c.g.w.brk.broken()
	if err == nil {
		err = c.g.brk.broken()
	}
	if err == nil {
		// The counter's brokenBit is set just before the breaker records
		// why; the reason is a moment away.
		<-c.g.brk.ch
		err = c.g.brk.broken()
	}
	return fmt.Errorf("local: %v on rank %d: %w", call, c.rank, err)
}

// agree checks that the ranks' arguments for collective k are valid and
// consistent. It reads only shared state, so every rank gets the same
// answer.
func (g *group) agree(k uint64) error {
	p := k & 1
	for j := range g.slots {
		if err := g.slots[j].a[p].argErr; err != nil {
			return err
		}
	}
	fp0 := g.slots[0].a[p].fp
	for j := 1; j < g.size; j++ {
		if g.slots[j].a[p].fp != fp0 {
			fps := make([]comm.Fingerprint, g.size)
			for r := range fps {
				fps[r] = g.slots[r].a[p].fp
			}
			return comm.CheckFingerprints(fps)
		}
	}
	return nil
}

// depart records that this rank has finished reading and writing peers'
// memory for collective k, and wakes parked peers.
func (c *rankComm) depart(k uint64) {
	c.g.slots[c.rank].depart.Store(k)
	c.g.wakeAll(c.rank)
}

// wakeAll wakes every parked rank of g other than me.
func (g *group) wakeAll(me int) {
	for j := range g.slots {
		if j != me && g.slots[j].waiting.Load() != 0 {
			select {
			case g.slots[j].wake <- struct{}{}:
			default:
			}
		}
	}
}

// waitDepart waits until rank j has departed collective k (all ranks when
// j < 0). It ignores contexts and broken state: once a collective is
// committed every rank finishes its bounded share of the copying, and
// returning earlier would let peers touch memory the caller owns again.
func (c *rankComm) waitDepart(k uint64, j int) {
	g := c.g
	me := &g.slots[c.rank]
	lo, hi := j, j+1
	if j < 0 {
		lo, hi = 0, g.size
	}
	for r := lo; r < hi; r++ {
		if r == c.rank {
			continue
		}
		s := &g.slots[r]
		for i := 0; s.depart.Load() < k; i++ {
			if i < spinLoads {
				continue
			}
			if i < spinLoads+spinYields {
				runtime.Gosched()
				continue
			}
			me.waiting.Store(1)
			if s.depart.Load() < k {
				<-me.wake
			}
			me.waiting.Store(0)
		}
	}
}

// Abort implements comm.Comm: it breaks the whole world, so that every
// blocked or future call on any communicator derived from it fails with an
// error wrapping ErrBroken and ErrAborted. It does not exit the process.
func (c *rankComm) Abort(code int) error {
	c.g.w.brk.breakWith(fmt.Errorf("%w: %w: rank %d called Abort(%d)", comm.ErrBroken, comm.ErrAborted, c.rank, code))
	return nil
}

// Free implements comm.Comm. It is local: other ranks' handles stay
// usable. Freeing twice returns ErrFreed.
func (c *rankComm) Free() error {
	if c.freed.Swap(true) {
		return fmt.Errorf("local: Free on rank %d: %w", c.rank, comm.ErrFreed)
	}
	return nil
}
