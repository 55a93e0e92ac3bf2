package local

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/internal/ctxerr"
	"github.com/pzgo/pz/internal/spin"
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
	// spinLoads, spinFit, spinProbe and spinYields shape the wait of
	// spinWait. Ranks that run on two cores at once see each other's
	// stores in about 0.1 µs: there, polling a few hundred nanoseconds
	// (spinLoads checks) halved the latency of small collectives against
	// yielding after every check.
	//
	// But two ranks can end up on one P, taking turns through
	// runtime.Gosched while the other P sleeps: a rank that wakes a
	// parked peer puts it in its own P's next slot, and Gosched queues the
	// yielding rank without waking an idle P (an 8-byte AllReduce after a
	// Barrier took 0.4-0.7 µs instead of 0.25 in 19 of 24 figures of
	// `pzrun -n 2 bench comm`; BenchmarkAfterBarrier counts the shared
	// threads). An idle P steals a goroutine from a running P's next slot
	// only after a few microseconds, so a group that fits on the Ps
	// (ranks <= GOMAXPROCS) polls up to spinFit instead, pausing between
	// checks: long enough for the runtime to move the peer away (8 B
	// 0.21-0.23 µs). The cost: where the host time-slices the vCPUs, a
	// polling rank takes time its peer needs (1 KiB AllReduce 1.7 µs
	// against 0.5 yielding at once; docs/performance.md).
	//
	// A rank polling for a peer that cannot run only wastes time, so a
	// rank polls only while polling has been paying off: one wait that
	// polling did not end turns it off, and every spinProbe-th wait tries
	// again. Then it yields up to spinYields times (which lets ranks share
	// cores) and parks on a channel, so an idle rank costs no CPU.
	spinLoads  = 128
	spinFit    = 50 * time.Microsecond
	spinProbe  = 16
	spinYields = 30
	// countedMin is the smallest group that arrives through a counter
	// (see arriveCounted) instead of every rank watching every slot,
	// whatever GOMAXPROCS; groups with more ranks than GOMAXPROCS always
	// do. A watching rank reads all n slots and, arriving, wakes every
	// parked peer to re-check: n² work per collective. Ranks that each
	// have a core pay that gladly for one synchronization with no third
	// party (2 ranks on 2 cores: ~10% faster than counted); with more
	// ranks than cores, or many ranks, it dominates (an 8-byte AllReduce
	// over 1,024 ranks took 13 ms watched, 0.25 ms counted).
	countedMin = 32
	// sweepAllBelow is the group size below which a departure sweeps
	// every mailbox, as the original design did, instead of only those
	// that may hold a call it strands: at most 31 mailboxes, and
	// receives in small groups need not count themselves for it (see
	// group.await), so the point-to-point path of 2-16 ranks pays
	// nothing for departures. Counting costs two uncontended atomic
	// adds per posted receive, which made Halo and PingPong on 2 ranks
	// about 4% slower on a loaded 2-core machine.
	sweepAllBelow = 32
)

// brokenBit marks a group's commit counter once a rank abandoned a
// collective. It is set with a compare-and-swap only while the current
// collective has not yet collected every commit, so each such collective is
// either committed (all ranks proceed) or broken (all ranks fail).
const brokenBit = 1 << 63

// New returns a world of n in-process ranks: element i is rank i's
// communicator. Each rank's Comm must be used by that rank's goroutines
// only; collectives that several of them call at once run one after the
// other (see comm.Comm). Run starts the goroutines for you, handles
// failures, and makes a collective called on one rank's Comm with another
// rank's context fail; use New to manage them yourself.
func New(n int) ([]comm.Comm, error) {
	if n < 1 {
		return nil, fmt.Errorf("local: world of %d ranks: %w", n, comm.ErrInvalidArg)
	}
	w := &world{closed: make(chan struct{}), ranks: make([]worldRank, n)}
	close(w.closed)
	w.brk.init()
	ranks := make([]int, n)
	for i := range ranks {
		ranks[i] = i
	}
	g := newGroup(w, ranks, nil)
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
	msgs   sync.Pool     // *message: eager messages, reused once received (p2p.go)
	posts  sync.Pool     // *recvPost: blocking receives' posts, reused once done
	left   message       // its address is the mark leave's sweep hands a blocking receive (p2p.go)
	freed  message       // its address is the mark Free hands a blocking receive (endPending)

	mu    sync.Mutex
	ranks []worldRank // by world rank: what leave needs to know
}

// worldRank is what the world knows of one of its ranks for leave: the
// groups it belongs to (so that a departure costs the number of its
// groups, not of the world's) and whether it left.
type worldRank struct {
	// in lists the groups the rank belongs to, oldest first, while
	// some member of each still holds it (see world.release): a group
	// every member freed or left goes, so that it can be collected.
	in   []membership
	left *string // why the rank left Run, once it did
}

// The states of a member of a group, in group.hold (under world.mu).
const (
	unlisted = iota // not in its world rank's list: it had left Run when g was made, or no member held g then
	holding         // listed, and it may still use g
	released        // listed, but it freed its handle or left Run
)

// membership is one rank's place in a group: rank i of g.
type membership struct {
	g *group
	i int
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

// forPeers is cause as the peers of a rank that abandoned a collective
// see it: a plain context.Canceled or context.DeadlineExceeded (its
// context ended, with no cause of its own) is named, not wrapped, so
// that a peer's error does not match an end of the peer's own context;
// a cause (a *runtimeview.SignalError, the program's) stays wrapped.
func forPeers(cause error) error {
	if cause == context.Canceled || cause == context.DeadlineExceeded {
		return errors.New(cause.Error())
	}
	return cause
}

// broken returns the reason b is broken, or nil.
func (b *breaker) broken() error {
	if p := b.err.Load(); p != nil {
		return *p
	}
	return nil
}

// breakWith breaks w with err (unless it is broken already) and ends the
// pending non-blocking point-to-point requests of every communicator of
// w (see group.endBroken).
func (w *world) breakWith(err error) {
	w.brk.breakWith(err)
	cause := w.brk.broken()
	w.mu.Lock()
	seen := map[*group]bool{}
	var gs []*group
	for _, r := range w.ranks {
		for _, m := range r.in {
			if !seen[m.g] {
				seen[m.g] = true
				gs = append(gs, m.g)
			}
		}
	}
	w.mu.Unlock()
	for _, g := range gs {
		g.endBroken(cause)
	}
}

// breakWith breaks g with err (unless it is broken already) and ends its
// pending non-blocking point-to-point requests (see endBroken), and
// breaks g's group of non-blocking collectives alike, if it was made: a
// non-blocking collective on a broken communicator then ends (its Done
// closes) with the same error as any other call on it, where it used to
// wait on the intact duplicate for ranks that would never start it.
func (g *group) breakWith(err error) {
	g.brk.breakWith(err)
	cause := g.brk.broken()
	g.endBroken(cause)
	g.w.mu.Lock()
	kid := g.nbcKid
	g.w.mu.Unlock()
	if kid != nil {
		kid.breakWith(cause) // its waits watch its breaker
	}
}

// endBroken ends the non-blocking point-to-point requests pending on g
// once g or its world is broken (cause): the Irecvs posted in its
// mailboxes (a started persistent receive too) complete with an error
// wrapping cause, and the messages by reference that no receiver has
// taken (a large Isend, a Send, an Ssend) are withdrawn and fail with
// it, releasing their senders. A request's Done channel (comm.Notifier)
// thus closes on a break, as its Wait and Test end, and the request-set
// functions that wait on Done (comm.WaitAny, WaitSome, TestAll) end
// too; and a withdrawn message's buffer is its sender's again. Blocking
// receives stay posted: they watch the breakers themselves and withdraw
// their posts. A call that checked g before the break and posts or
// queues after this sweep sees the break under the same mailbox lock
// (irecv, startMode) and fails alike.
func (g *group) endBroken(cause error) {
	for j := range g.boxes {
		b := &g.boxes[j]
		var reqs []*recvPost
		var msgs []*message
		b.mu.Lock()
		kept := b.posted[:0]
		for _, p := range b.posted {
			if p.req == nil {
				kept = append(kept, p)
				continue
			}
			reqs = append(reqs, p)
		}
		clear(b.posted[len(kept):])
		b.posted = kept
		unexp := b.unexp[:0]
		for _, m := range b.unexp {
			if m.done == nil {
				unexp = append(unexp, m) // eager: its sender is not waiting
				continue
			}
			msgs = append(msgs, m)
		}
		clear(b.unexp[len(unexp):])
		b.unexp = unexp
		b.mu.Unlock()
		for _, p := range reqs {
			if p.counted {
				g.matched(p.src)
			}
			p.req.complete(comm.Status{}, brokenReqErr(p.call, j, fromWhom(p.src, p.tag), cause))
			g.w.recyclePost(p)
		}
		for _, m := range msgs {
			m.err = cause
			g.releaseSender(m)
		}
	}
}

// brokenReqErr is the error of a point-to-point request (call, on rank
// `rank`, whom naming its peer and tag) that its communicator's break
// (cause) ended: the same from the break's sweep (endBroken), Wait and
// Test, whichever reports it first.
func brokenReqErr(call string, rank int, whom string, cause error) error {
	return fmt.Errorf("local: %s on rank %d %s: %w", call, rank, whom, cause)
}

// group is one communicator, shared by its ranks.
type group struct {
	w      *world
	size   int
	slots  []*slot // allocated one by one so that each starts on a cache line
	boxes  []mailbox
	awaits []awaitCount // by source rank, sweepAllBelow ranks and more: see group.await
	brk    breaker
	// beforePark, when set (tests only), runs once, on the first rank
	// about to park in spinWait or a request's Wait: it makes that rank's
	// wake and a break race as they do when a peer completes a collective
	// or a send and then fails.
	beforePark atomic.Pointer[func()]

	_         [64]byte      // keep the counter off the read-mostly fields' line
	committed atomic.Uint64 // commits of two-phase collectives, plus brokenBit
	_         [56]byte
	// directAt[k&1] is k once some rank's contribution to collective k is
	// its caller's memory (see anyDirect); written by such ranks only, so
	// small collectives find it in their cache.
	directAt [2]atomic.Uint64
	_        [48]byte

	// A counted group (more ranks than GOMAXPROCS, or countedMin and
	// more) arrives through arrivals; the last rank to arrive at
	// collective k checks the agreement for everyone, stores its verdict
	// (and the result of a small AllReduce or AllGather) at k&1, and then
	// sets released to k.
	counted  bool
	procs    int           // GOMAXPROCS when the group was made
	arrivals atomic.Uint64 // arrivals at collectives, summed over all of them
	_        [56]byte
	released atomic.Uint64 // the last collective whose arrivals are complete
	_        [56]byte
	verdict  [2]error     // the agreement on collective k, at k&1
	result   [2][]byte    // a small AllReduce's or AllGather's result, made once by the releaser
	made     [2]bool      // whether result holds collective k's, at k&1
	nGone    atomic.Int32 // ranks that left Run; stored after their gone marks

	splitMu sync.Mutex
	splits  map[splitKey]*splitEntry

	worldRanks []int                    // the world rank of each rank
	gone       []atomic.Pointer[string] // why a rank left Run, if it did

	nbcOnce sync.Once
	nbc     *group // the group of the ranks' non-blocking collectives

	// Under w.mu: each member's state (unlisted, holding, released),
	// how many hold g, and g's group of non-blocking collectives once
	// made (nbc, for those who went through nbcOnce).
	hold   []uint8
	held   int
	nbcKid *group
}

// nbcGroup returns the group on which the ranks run their non-blocking
// collectives, made by the first rank to need it: a duplicate that needs no
// communication, since in-process ranks share the group.
func (g *group) nbcGroup() *group {
	g.nbcOnce.Do(func() { g.nbc = newGroup(g.w, g.worldRanks, g) })
	return g.nbc
}

// newGroup makes a group whose rank i is world rank worldRanks[i], and
// records it with each of its ranks in w, so that a rank leaving Run can
// find the groups it belongs to. Ranks that left already are marked gone
// in it (a group of non-blocking collectives is made when a rank first
// needs it, perhaps after others left). parent is the group whose
// non-blocking collectives the new group runs, or nil: a member that
// freed parent holds the new group no more than parent (see release),
// but is listed with it, so that its leaving Run marks it gone there
// too, unless no member holds it at all.
func newGroup(w *world, worldRanks []int, parent *group) *group {
	n := len(worldRanks)
	g := &group{w: w, size: n, slots: make([]*slot, n), boxes: make([]mailbox, n), splits: map[splitKey]*splitEntry{},
		worldRanks: worldRanks, gone: make([]atomic.Pointer[string], n),
		procs: runtime.GOMAXPROCS(0)}
	if n >= sweepAllBelow {
		g.awaits = make([]awaitCount, n)
	}
	g.counted = n > g.procs || n >= countedMin
	g.brk.init()
	for i := range g.slots {
		g.slots[i] = &slot{wake: make(chan struct{}, 1)}
	}
	g.hold = make([]uint8, n)
	w.mu.Lock()
	for i, r := range worldRanks {
		wr := &w.ranks[r]
		switch {
		case wr.left != nil:
			g.gone[i].Store(wr.left)
			g.nGone.Add(1) // unlisted: nothing of it will need g
		case parent != nil && parent.hold[i] != holding:
			g.hold[i] = released
		default:
			g.hold[i] = holding
			g.held++
		}
	}
	for i, r := range worldRanks {
		if g.held == 0 {
			clear(g.hold) // no one will use g: nothing need find it
			break
		}
		if g.hold[i] != unlisted {
			w.ranks[r].in = append(w.ranks[r].in, membership{g: g, i: i})
		}
	}
	if parent != nil {
		parent.nbcKid = g
	}
	w.mu.Unlock()
	if parent != nil {
		// parent broke before it knew of g (its breakWith reads nbcKid
		// under w.mu after breaking): g is born broken, so that the
		// collectives started on parent before the break fail as they
		// would have on a g made earlier.
		if err := parent.brk.broken(); err != nil {
			g.brk.breakWith(err)
		}
	}
	return g
}

// release records that member i of g holds it no more: it freed its
// handle, or left Run. Its place in g's group of non-blocking
// collectives goes with it. Once no member holds g, g leaves the lists
// of its world ranks, and with them the world's reach: until then g
// stays listed for every member, so that a member that freed its handle
// and then leaves Run still fails the others' calls that wait for it
// (see leave), and a break still ends their pending requests (see
// world.breakWith). w.mu is held.
func (w *world) release(g *group, i int) {
	if g.hold[i] != holding {
		return
	}
	g.hold[i] = released
	g.held--
	if g.nbcKid != nil {
		w.release(g.nbcKid, i)
	}
	if g.held > 0 {
		return
	}
	for j, r := range g.worldRanks {
		if g.hold[j] == unlisted {
			continue
		}
		in := w.ranks[r].in
		// The newest first: a communicator freed is mostly a recent one.
		for x := len(in) - 1; x >= 0; x-- {
			if in[x].g == g {
				w.ranks[r].in = slices.Delete(in, x, x+1)
				break
			}
		}
	}
}

// leave records that world rank r's function returned: it will never
// arrive at another collective, send or receive. Every rank waiting for it
// in a collective, now or later, fails with ErrBroken naming it instead of
// waiting for ever, and so does every point-to-point call that only it
// could complete (see sweep). It costs O(1) per group of r, amortized:
// O(size) only for a departure that fails waiting calls, and for the last
// two of a group (see sweep).
func (w *world) leave(r int, why string) {
	w.mu.Lock()
	w.ranks[r].left = &why
	in := slices.Clone(w.ranks[r].in) // release deletes in place
	w.mu.Unlock()
	for _, m := range in {
		m.g.leave(m.i, &why)
	}
	// r holds none of its groups any more; those that no other member
	// holds go (see release), after the marks above: a group still held
	// by others stays listed, with r marked gone in it.
	w.mu.Lock()
	for _, m := range in {
		w.release(m.g, m.i)
	}
	w.mu.Unlock()
}

// leave records in g that its rank i left Run (why), wakes the ranks whose
// collective can no longer complete, and fails the point-to-point calls
// that only i could complete.
func (g *group) leave(i int, why *string) {
	g.gone[i].Store(why)
	nGone := int(g.nGone.Add(1))
	g.wakeForLeft(i)
	// Each load below comes after the mark and the count (Go's atomics are
	// sequentially consistent), as a receive or probe counts itself
	// before it checks them (see group.await): either the count shows it
	// here, or it sees the mark there.
	full := g.size < sweepAllBelow || // receives do not count themselves
		nGone >= g.size-1 || // any-source receives and probes may be unreachable now
		g.awaited(i) // a receive or probe names i
	g.sweep(i, *why, full)
}

// wakeForLeft wakes the parked ranks of g that rank i's departure may let
// go: a departure ends only a wait for arrivals (a watched collective's,
// a counted collective's release), never one for commits, departures or
// chunks, which every rank that arrived reaches. A watched group is
// small (fewer than countedMin ranks): its parked ranks are all woken. In
// a counted group, a rank waits for a release only while its collective
// has arrivals and is not released; when i leaves, i's mark is stored
// before arrivals is read here, and a rank that arrives adds itself to
// arrivals before it checks the marks (condReleased): either that rank is
// counted here and woken, or it sees i gone and does not park. When
// every arrival counted is released (as at the end of most programs),
// nobody waits for a release, and no slot is scanned.
func (g *group) wakeForLeft(i int) {
	if g.counted && g.arrivals.Load() <= g.released.Load()*uint64(g.size) {
		return
	}
	g.wakeAll(i)
}

// sweep fails the point-to-point calls of g that rank i's departure (why)
// leaves unmatched for ever: posted receives from i, and any-source ones
// whose rank now has no peer left, complete with ErrBroken (a blocking
// receive is handed w.left, an Irecv's request completed); blocked probes
// are woken to check again (see group.unreachable); and the messages by
// reference queued for i (a large Send, an Ssend, whose senders wait) are
// failed. Each mailbox swept is swept under its lock after i is marked
// gone, and receives and sends check the mark under the same lock before
// they post or queue: each call is either swept here or refused there.
// Messages queued before i left stay, and are received as usual.
//
// Only i's own mailbox is swept unless full (in a group of sweepAllBelow
// ranks or more): a receive or probe from i
// counts itself (group.await) before it checks the mark, so with none
// counted none is posted that i's departure strands (see group.leave),
// and any-source ones can be stranded only once every rank but one has
// left.
func (g *group) sweep(i int, why string, full bool) {
	if !full {
		g.sweepBox(i, i, why)
		return
	}
	for j := range g.boxes {
		g.sweepBox(j, i, why)
	}
}

// sweepBox is sweep's work on rank j's mailbox.
func (g *group) sweepBox(j, i int, why string) {
	b := &g.boxes[j]
	b.mu.Lock()
	kept := b.posted[:0]
	for _, p := range b.posted {
		err := g.unreachable(j, p.src)
		switch {
		case err == nil:
			kept = append(kept, p)
		case p.req == nil:
			if p.counted {
				g.matched(p.src)
			}
			p.handoff <- &g.w.left // capacity 1 and p was posted once: never blocks
		default:
			if p.counted {
				g.matched(p.src)
			}
			p.req.complete(comm.Status{}, fmt.Errorf("local: %s on rank %d %s: %w", p.call, j, fromWhom(p.src, p.tag), err))
			g.w.recyclePost(p)
		}
	}
	clear(b.posted[len(kept):])
	b.posted = kept
	for _, ch := range b.probes {
		close(ch)
	}
	b.probes = b.probes[:0]
	if j == i {
		unexp := b.unexp[:0]
		for _, m := range b.unexp {
			if m.done == nil {
				unexp = append(unexp, m) // eager: its sender is not waiting
				continue
			}
			m.err = fmt.Errorf("%w: rank %d %s before receiving this message", comm.ErrBroken, i, why)
			g.releaseSender(m)
		}
		clear(b.unexp[len(unexp):])
		b.unexp = unexp
	}
	b.mu.Unlock()
}

// awaitCount counts the receives and probes from one rank (see
// group.await) on a line of its own, written by the ranks that receive
// from it.
type awaitCount struct {
	n atomic.Int64
	_ [56]byte
}

// slot is one rank's area of a group. The owner writes args[k&1] (and its
// eager copy) and then its seq before arriving at collective k; the others
// read them after seeing seq >= k. Two copies suffice: a rank can only
// reach k+2 after every rank arrived at k+1, i.e. finished reading k's.
//
// A slot is 1024 bytes, a size class of Go's allocator whose objects start
// on 64-byte boundaries. seq has a cache line of its own, so that peers
// polling it do not steal the line while its owner fills in the args; the
// args a peer reads first fill the next line.
type slot struct {
	a      [2]args
	depart atomic.Uint64 // last collective this rank finished moving data for
	// matched counts the receives from this rank that its sends matched
	// (or a sweep failed): see group.await. Written by this rank's sends,
	// read by its departure.
	matched atomic.Int64
	_       [48]byte
	// Read by every rank that publishes anything, written only when the
	// owner parks: a line of its own keeps those reads cache hits.
	waiting atomic.Uint32 // 1 while the owner is parked
	wake    chan struct{} // capacity 1; a token means "re-check"
	_       [48]byte
}

// args is what one rank contributes to one collective.
type args struct {
	// One line holds what a peer reads first: the collective, the
	// agreement and a contribution of up to 32 bytes, so that a small
	// collective costs each peer one cache miss per rank.
	seq    atomic.Uint64 // the collective these args are for, stored last
	fp     comm.Fingerprint
	bad    bool // argErr is set
	direct bool // src is the caller's memory: peers must finish before the owner returns
	inl    int8 // src is inline[:inl]; -1 if it is not
	_      [5]byte
	inline [32]byte // eager copies up to 32 bytes

	argErr error
	src    []byte // the contribution: the caller's memory or an eager copy
	_      [24]byte

	small [64]byte // eager copies of 33 to 64 bytes
	dst   []byte   // the receive buffer, written by peers (Reduce, AllReduce)
	offs  []int    // prefix sums of per-rank counts (Scatter, Alltoall)
	color int
	key   int
	eager []byte // eager copies above 64 bytes
	_     [320 - 64 - 64 - 64 - 64 - 24]byte

	// The work queue of the data phase (see share): every rank claims
	// chunks with claim, so it gets a line of its own; done is written
	// once by the owner and polled by the others.
	claim atomic.Uint64 // next unclaimed chunk of this rank's queue
	_     [56]byte
	done  atomic.Uint64 // chunks of any queue this rank has completed (see abandonShare), plus doneFailed
	_     [56]byte
}

// The layout above is what the comments promise; these fail to compile if
// a field change breaks it.
var (
	_ [unsafe.Offsetof(args{}.small) - 128]struct{}
	_ [128 - unsafe.Offsetof(args{}.small)]struct{}
	_ [unsafe.Offsetof(args{}.claim) - 320]struct{}
	_ [320 - unsafe.Offsetof(args{}.claim)]struct{}
	_ [unsafe.Sizeof(args{}) - 448]struct{}
	_ [448 - unsafe.Sizeof(args{})]struct{}
	_ [unsafe.Sizeof(slot{}) - 1024]struct{}
	_ [1024 - unsafe.Sizeof(slot{})]struct{}
)

// rankComm is one rank's handle on a group; it implements comm.Comm.
type rankComm struct {
	g    *group
	rank int
	// collMu orders the collectives called on this rank's communicator
	// from several goroutines: each runs whole, one after the other (as on
	// comm/mpi), and seq below counts them.
	collMu  sync.Mutex
	seq     uint64 // collectives entered on this communicator
	commits uint64 // two-phase collectives committed on it
	freed   atomic.Bool
	scratch []byte // blockBytes of scratch for reductions that alias
	spin    int    // polling budget of spinWait: spinLoads or 0
	waits   uint32 // spinWait calls that had to wait, for probing

	nbcOnce sync.Once
	nbc     *comm.NBC // runs the non-blocking collectives; made by the first one
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
//
// It locks collMu; the caller unlocks it when the collective ends, unless
// begin returns an error.
func (c *rankComm) begin(ctx context.Context, call comm.Call) (k uint64, a *args, err error) {
	if err := c.foreignCaller(ctx, call); err != nil {
		return 0, nil, err
	}
	c.collMu.Lock()
	defer func() {
		if err != nil {
			c.collMu.Unlock()
		}
	}()
	if err := c.usable(); err != nil {
		// This rank's own context had ended too (not for the break, as
		// Run's cancel does): say so, as its call would have on a
		// communicator that the others had not broken first.
		if cerr := ctxerr.Of(ctx, comm.ErrBroken); cerr != nil && !errors.Is(cerr, comm.ErrBroken) && !errors.Is(err, comm.ErrFreed) {
			return 0, nil, fmt.Errorf("local: %v on rank %d: %w; and %w", call, c.rank, cerr, err)
		}
		return 0, nil, fmt.Errorf("local: %v on rank %d: %w", call, c.rank, err)
	}
	c.seq++
	k = c.seq
	if err := ctx.Err(); err != nil {
		return 0, nil, c.abandonArrival(call, k, ctxerr.Of(ctx, comm.ErrBroken))
	}
	a = &c.g.slots[c.rank].a[k&1]
	a.argErr = nil
	a.src, a.dst = nil, nil
	if a.direct { // peers may be reading the first line: write it only if needed
		a.direct = false
	}
	// Peers touch these only after this rank arrives at k, and stopped
	// touching them (for k-2) before arriving at k-1. Store only if set:
	// an atomic store is a locked instruction on amd64, and most
	// collectives never use the counters.
	if a.claim.Load() != 0 {
		a.claim.Store(0)
	}
	if a.done.Load() != 0 {
		a.done.Store(0)
	}
	return k, a, nil
}

// foreignCaller returns an error if ctx is the context Run gave another
// rank of c's world: a goroutine of that rank called a collective on this
// rank's communicator (through a package-level variable, or a RuntimeView
// or resource set handed across). Its collective would take this rank's
// place, and the two ranks would wait for each other for ever (or until a
// deadline, with an error that blames the wrong thing), so it fails at once,
// before touching c. A context that Run did not make (New's ranks, the
// engine of the non-blocking collectives) is not checked.
func (c *rankComm) foreignCaller(ctx context.Context, call comm.Call) error {
	m, _ := ctx.Value(rankKey{}).(*rankMark)
	if m == nil || m.w != c.g.w {
		return nil
	}
	if owner := c.g.worldRanks[c.rank]; m.rank != owner {
		return fmt.Errorf("local: %v on rank %d: the communicator belongs to world rank %d, but the call came from world rank %d's goroutine (its context is that rank's): %w: "+
			"a rank's Comm, and the RuntimeView or resource set it came from, must be used by that rank only; "+
			"share values between in-process ranks, not a rank's Comm or RuntimeView", call, c.rank, owner, m.rank, comm.ErrInvalidArg)
	}
	return nil
}

// contribute publishes b as this rank's contribution to the collective:
// an eager copy that peers may read at any time, or b itself, which peers
// read in place (direct: the owner must not return before they are done).
func (a *args) contribute(b []byte, eager bool) {
	if eager {
		a.src = a.eagerCopy(b)
	} else {
		a.src, a.direct = b, true
	}
}

// contribution is a peer's src as published at arrival: from the first
// line when it is inline (no need to read src's line), else src.
func (a *args) contribution() []byte {
	if a.inl >= 0 {
		return a.inline[:a.inl]
	}
	return a.src
}

// eagerCopy copies b into memory owned by the slot and returns the copy.
func (a *args) eagerCopy(b []byte) []byte {
	if len(b) <= len(a.inline) {
		e := a.inline[:len(b)]
		copy(e, b)
		return e
	}
	if len(b) <= len(a.small) {
		e := a.small[:len(b)]
		copy(e, b)
		return e
	}
	if cap(a.eager) < len(b) {
		a.eager = make([]byte, max(len(b), 256))
	}
	e := a.eager[:len(b)]
	copy(e, b)
	return e
}

// arrive publishes this rank's args for collective k, waits until every
// rank has published its own, and checks that the ranks' arguments agree.
// A nil error means the data phase may start. Peers may read the arrived
// args at once, so only slot-owned memory (eager copies) may be read by
// peers before commit.
func (c *rankComm) arrive(ctx context.Context, call comm.Call, k uint64) error {
	g := c.g
	a := &g.slots[c.rank].a[k&1]
	a.bad = a.argErr != nil
	inl := int8(-1)
	if n := len(a.src); n <= len(a.inline) && (n == 0 || &a.src[0] == &a.inline[0]) {
		inl = int8(n)
	}
	a.inl = inl
	if a.direct {
		g.directAt[k&1].Store(k) // before seq: whoever sees every arrival sees it
	}
	a.seq.Store(k)
	if g.counted {
		return c.arriveCounted(ctx, call, k)
	}
	g.wakeAll(c.rank)
	if err := c.waitArrivals(ctx, call, k); err != nil {
		return err
	}
	return c.ownCall(g.agree(k), k)
}

// A cond is what spinWait waits for. It is a plain struct, not a closure,
// so that waiting allocates nothing.
type cond struct {
	kind   uint8
	k      uint64         // condArrivals, condDepart: the collective
	next   int            // condArrivals: first rank not yet seen
	s      *slot          // condDepart: whose departure
	v      *atomic.Uint64 // condCounter: the counter
	target uint64         // condCounter, condDone: the value to reach
	left   int            // condArrivals, condReleased: 1 + a missing rank that left Run, 0 if none
	park   bool           // park at once: polling and yielding cannot pay
}

const (
	condArrivals = iota // every rank published args for k (or the group broke)
	condDepart          // s departed k
	condCounter         // *v >= target
	condDone            // the ranks completed target chunks of k's queues
	condReleased        // the counted group released k (or broke)
)

func (c *rankComm) ready(w *cond) bool {
	g := c.g
	switch w.kind {
	case condArrivals:
		p := w.k & 1
		for ; w.next < g.size; w.next++ {
			if g.slots[w.next].a[p].seq.Load() < w.k {
				// A peer that abandoned will never arrive, nor will one
				// that left Run (any of those still missing).
				if g.brk.err.Load() != nil {
					return true
				}
				for j := w.next; j < g.size; j++ {
					if g.gone[j].Load() != nil && g.slots[j].a[p].seq.Load() < w.k {
						w.left = j + 1
						return true
					}
				}
				return false
			}
		}
		return true
	case condDepart:
		return w.s.depart.Load() >= w.k
	case condReleased:
		if g.released.Load() >= w.k || g.brk.err.Load() != nil {
			return true
		}
		if g.nGone.Load() > 0 {
			for j := range g.size {
				if g.gone[j].Load() != nil && g.slots[j].a[w.k&1].seq.Load() < w.k {
					w.left = j + 1
					return true
				}
			}
		}
		return false
	case condDone:
		p := w.k & 1
		var sum uint64
		for _, s := range g.slots {
			sum += s.a[p].done.Load() &^ doneFailed
		}
		return sum >= w.target
	default:
		v := w.v.Load()
		return v&^brokenBit >= w.target || v&brokenBit != 0
	}
}

// spinWait waits until w holds: a short spin catches peers that are about
// to arrive when that has been working (see spinLoads), yields let other
// ranks run when there are more ranks than cores, and then the rank parks
// until woken. With breaks, it returns early with the cause when done
// closes (errCtx; a nil done never does) or the group or world breaks;
// without, it waits for w regardless.
func (c *rankComm) spinWait(done <-chan struct{}, breaks bool, w *cond) error {
	g := c.g
	me := g.slots[c.rank]
	if c.ready(w) {
		return nil // says nothing about whether polling pays
	}
	budget := c.spin
	if c.waits++; budget == 0 && c.waits%spinProbe == 0 {
		budget = spinLoads
	}
	if w.park {
		budget = 0
	}
	if budget > 0 && g.size <= g.procs {
		if c.pollFor(w, spinFit) {
			c.spin = spinLoads
			return nil
		}
	} else {
		for range budget {
			if c.ready(w) {
				c.spin = spinLoads
				return nil
			}
		}
	}
	if !w.park {
		c.spin = 0
	}
	for i := 0; ; i++ {
		if c.ready(w) {
			return nil
		}
		if i < spinYields && !w.park {
			runtime.Gosched()
			continue
		}
		me.waiting.Store(1)
		if c.ready(w) {
			me.waiting.Store(0)
			return nil
		}
		// A wait of a collective's caller ends with a break (Abort, or a
		// rank of Run that failed) even when its context cannot end
		// (done nil: that case blocks for ever); an internal wait that
		// must see w hold (breaks false) ends only then.
		g.runBeforePark()
		var cause error
		if !breaks {
			<-me.wake
		} else {
			select {
			case <-me.wake:
			case <-done:
				cause = errCtx
			case <-g.brk.ch:
				cause = g.brk.broken()
			case <-g.w.brk.ch:
				cause = g.w.brk.broken()
			}
		}
		me.waiting.Store(0)
		if cause != nil {
			// w may have come to hold as the wait ended: a peer that
			// completed this collective and then failed both wakes this
			// rank and breaks the world, and select picks either. A
			// completed wait completes, as the peers saw it do.
			if c.ready(w) {
				return nil
			}
			return cause
		}
	}
}

// pollFor checks w until it holds, for at most d; it reports whether
// it does. It pauses between checks (see pause).
func (c *rankComm) pollFor(w *cond, d time.Duration) bool {
	t0 := time.Now()
	for {
		for range 16 {
			if c.ready(w) {
				return true
			}
			spin.Pause()
		}
		if time.Since(t0) > d {
			return false
		}
	}
}

// errCtx stands for "the context ended" inside spinWait's callers.
var errCtx = errors.New("local: context done")

// waitArrivals waits until every rank has published its args for k.
func (c *rankComm) waitArrivals(ctx context.Context, call comm.Call, k uint64) error {
	g := c.g
	w := cond{kind: condArrivals, k: k}
	err := c.spinWait(ctx.Done(), true, &w)
	if err == nil && w.next < g.size {
		err = g.broken()
		if err == nil && w.left > 0 {
			err = fmt.Errorf("%w: rank %d %s; it will never reach this %v", comm.ErrBroken, w.left-1, *g.gone[w.left-1].Load(), call)
		}
	}
	if err == nil {
		return nil
	}
	if err == errCtx {
		err = ctxerr.Of(ctx, comm.ErrBroken)
	}
	return c.abandonArrival(call, k, err)
}

// arriveCounted is arrive for a counted group: each rank adds itself to
// the group's arrivals, and the last to arrive at k (it sees k·size)
// checks the agreement, makes the result of a small AllReduce or
// AllGather once for everyone (see makeResult), releases k and wakes the
// parked ranks. Every other rank waits for the release alone: O(1) work per rank where a watching rank
// does O(n), and each parked rank is woken once instead of once per
// arrival. A rank that has more than GOMAXPROCS arrivals still to come
// parks at once: some of those ranks are not running, and polling or
// yielding would only delay them.
func (c *rankComm) arriveCounted(ctx context.Context, call comm.Call, k uint64) error {
	g := c.g
	p := k & 1
	n := uint64(g.size)
	v := g.arrivals.Add(1)
	if v == k*n {
		g.verdict[p] = g.agree(k)
		if g.verdict[p] == nil {
			c.makeResult(k)
		}
		g.released.Store(k)
		g.wakeAll(c.rank)
		return c.ownCall(g.verdict[p], k)
	}
	w := cond{kind: condReleased, k: k, park: k*n-v > uint64(g.procs)}
	err := c.spinWait(ctx.Done(), true, &w)
	if g.released.Load() >= k {
		// Released, perhaps as the context ended: every rank arrived, so
		// this one takes part, as in a watched group.
		return c.ownCall(g.verdict[p], k)
	}
	if err == nil {
		err = g.broken()
		if err == nil && w.left > 0 {
			err = fmt.Errorf("%w: rank %d %s; it will never reach this %v", comm.ErrBroken, w.left-1, *g.gone[w.left-1].Load(), call)
		}
	}
	if err == errCtx {
		err = ctxerr.Of(ctx, comm.ErrBroken)
	}
	return c.abandonArrival(call, k, err)
}

// abandonArrival gives up collective k before it is committed: it breaks
// the group, so that peers waiting for this rank fail instead of waiting
// forever, and returns an error naming the ranks that had not arrived.
// Peers that already saw every arrival may finish a one-phase collective:
// they read only slot-owned copies, which stay valid.
func (c *rankComm) abandonArrival(call comm.Call, k uint64, cause error) error {
	g := c.g
	if errors.Is(cause, comm.ErrBroken) {
		// Someone else broke the group or the world first; report that.
		return fmt.Errorf("local: %v on rank %d: %w", call, c.rank, cause)
	}
	missing := g.missing(k, c.rank)
	// The peers learn who was missing too: the rank that gave up first is
	// rarely the one that never came.
	absent := comm.FormatRanks(missing) + " had not arrived"
	if len(missing) == 0 {
		absent = "every other rank had arrived"
	}
	g.breakWith(fmt.Errorf("%w: rank %d abandoned %v, where %s: %w", comm.ErrBroken, c.rank, call, absent, forPeers(cause)))
	return fmt.Errorf("local: %v on rank %d: %s: %w", call, c.rank, absent, cause)
}

// missing lists the ranks other than self that have not arrived at
// collective k.
func (g *group) missing(k uint64, self int) []int {
	var out []int
	for j, s := range g.slots {
		if j != self && s.a[k&1].seq.Load() < k {
			out = append(out, j)
		}
	}
	return out
}

// commit is the point of no return of a two-phase collective (one where
// peers read the caller's memory or write its receive buffer): every rank
// counts itself in, and once all have, a context ending no longer
// abandons the collective. Before that, a rank may still give up; it then
// marks the counter broken so that no rank proceeds.
func (c *rankComm) commit(ctx context.Context, call comm.Call) error {
	g := c.g
	c.commits++
	target := c.commits * uint64(g.size)
	// Count in with a compare-and-swap, never after the counter is broken:
	// then a count that reached target means committed, bit or no bit.
	for {
		v := g.committed.Load()
		if v&brokenBit != 0 {
			return c.brokenErr(call)
		}
		if g.committed.CompareAndSwap(v, v+1) {
			if v+1 == target {
				g.wakeAll(c.rank)
				return nil
			}
			break
		}
	}
	w := cond{kind: condCounter, v: &g.committed, target: target}
	cause := c.spinWait(ctx.Done(), true, &w)
	if cause == errCtx {
		cause = ctxerr.Of(ctx, comm.ErrBroken)
	}
	for {
		v := g.committed.Load()
		if v&^brokenBit >= target {
			return nil // committed (perhaps while the context ended): take part
		}
		if v&brokenBit != 0 {
			return c.brokenErr(call)
		}
		if cause == nil {
			cause = c.usable()
		}
		if g.committed.CompareAndSwap(v, v|brokenBit) {
			g.breakWith(fmt.Errorf("%w: rank %d abandoned %v: %w", comm.ErrBroken, c.rank, call, forPeers(cause)))
			g.wakeAll(c.rank)
			return fmt.Errorf("local: %v on rank %d: gave up before every rank committed: %w", call, c.rank, cause)
		}
	}
}

// anyDirect reports whether some rank's contribution to collective k is
// its caller's memory rather than an eager copy. It is called once every
// rank arrived at k (each stored directAt before arriving) and before
// this rank arrives at k+1; directAt[k&1] is next written at k+2, once
// every rank arrived at k+1. One load, where reading every slot's flag
// cost O(size) per rank and collective.
func (g *group) anyDirect(k uint64) bool {
	return g.directAt[k&1].Load() == k
}

// runBeforePark runs and clears the beforePark hook, if a test set one.
func (g *group) runBeforePark() {
	if h := g.beforePark.Load(); h != nil && g.beforePark.CompareAndSwap(h, nil) {
		(*h)()
	}
}

// broken returns why the world or g is broken (the world first: a rank
// of Run that failed is the cause of what follows), or nil.
func (g *group) broken() error {
	if err := g.w.brk.broken(); err != nil {
		return err
	}
	return g.brk.broken()
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
	for _, s := range g.slots {
		if s.a[p].bad {
			return s.a[p].argErr
		}
	}
	fp0 := g.slots[0].a[p].fp
	for _, s := range g.slots[1:] {
		if s.a[p].fp != fp0 {
			fps := make([]comm.Fingerprint, g.size)
			for r := range fps {
				fps[r] = g.slots[r].a[p].fp
			}
			return comm.CheckFingerprints(fps)
		}
	}
	return nil
}

// ownCall is the verdict of collective k as this rank reports it: a
// *comm.MismatchError, which comm.CheckFingerprints names after rank 0's
// call, names the call this rank made (its detail lists what the ranks
// called), so that the log of a rank that called Dup where rank 0 called
// Split says Dup. The verdict is shared by every rank: it is copied, not
// changed.
func (c *rankComm) ownCall(err error, k uint64) error {
	var me *comm.MismatchError
	if err == nil || !errors.As(err, &me) {
		return err
	}
	mine := c.g.slots[c.rank].a[k&1].fp.Call.String()
	if me.Op == mine {
		return err
	}
	return &comm.MismatchError{Op: mine, Detail: me.Detail}
}

// depart records that this rank has finished reading and writing peers'
// memory for collective k, and wakes parked peers.
func (c *rankComm) depart(k uint64) {
	c.g.slots[c.rank].depart.Store(k)
	c.g.wakeAll(c.rank)
}

// wakeAll wakes every parked rank of g other than me. The waiting flags
// are written only when a rank parks, so checking them is cheap.
func (g *group) wakeAll(me int) {
	for j, s := range g.slots {
		if j != me && s.waiting.Load() != 0 {
			select {
			case s.wake <- struct{}{}:
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
	lo, hi := j, j+1
	if j < 0 {
		lo, hi = 0, g.size
	}
	for r := lo; r < hi; r++ {
		if r == c.rank {
			continue
		}
		w := cond{kind: condDepart, k: k, s: g.slots[r]}
		_ = c.spinWait(nil, false, &w)
	}
}

// Abort implements comm.Comm: it breaks the whole world, so that every
// blocked or future call on any communicator derived from it fails with an
// error wrapping ErrBroken and ErrAborted. It does not exit the process.
func (c *rankComm) Abort(code int) error {
	c.g.w.breakWith(fmt.Errorf("%w: %w: rank %d called Abort(%d)", comm.ErrBroken, comm.ErrAborted, c.rank, code))
	return nil
}

// Free implements comm.Comm. It is local: other ranks' handles stay
// usable. Freeing twice returns ErrFreed. This rank's point-to-point
// calls still pending on c end with an error wrapping ErrFreed (see
// endPending). Once every rank of c freed its handle (or left Run), the
// world keeps nothing of the communicator: a program may make and free
// one per phase for as long as it runs.
func (c *rankComm) Free() error {
	if c.freed.Swap(true) {
		return fmt.Errorf("local: Free on rank %d: %w", c.rank, comm.ErrFreed)
	}
	c.endPending()
	c.nbcOnce.Do(func() {}) // no engine is made after this
	var err error
	if c.nbc != nil {
		err = c.nbc.Close()
	}
	// This rank holds the group no more: once no rank does, the world
	// forgets it (see world.release), and it is collected.
	w := c.g.w
	w.mu.Lock()
	w.release(c.g, c.rank)
	w.mu.Unlock()
	return err
}
