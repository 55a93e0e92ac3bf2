//go:build mpi

package mpi

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/pzgo/pz/comm"
)

// A watch makes no hang silent. MPI calls block until every rank they
// involve takes part; a rank that returned early, failed, or entered
// another collective leaves the others waiting forever. The watch knows
// which MPI operations this process waits in and since when; every
// report interval (PZ_COMM_REPORT, default 1m) it says on stderr which
// ones are stuck - a collective's call, its communicator's size and its
// sequence number there; a point-to-point call's kind, peer and tag -
// and after the timeout (PZ_COMM_TIMEOUT, off by default) it says so and
// ends the process, which mpirun turns into the end of the job. Every
// wait of this process on a peer is watched: collectives, blocking sends
// and receives, probes and request waits, whether they block in MPI
// (context.Background) or poll (a context that can be canceled). Waits
// through a request's Done channel (comm.WaitAny, WaitSome, the
// distributed scheduler's progress loop) are not: the request may be a
// receive posted ahead that nobody waits for yet.
type watch struct {
	report, timeout time.Duration
	rank, size      int
	out             io.Writer
	exit            func(code int)

	// p2p are the slots of point-to-point waits (sends, receives,
	// probes, request waits), claimed without a lock; ops takes the
	// waits that find every slot taken.
	p2p [p2pSlots]p2pSlot

	mu    sync.Mutex
	ops   []watched // point-to-point waits past the slots; what == 0 is free
	free  []int
	colls []*collSlot // one per communicator that ran a collective

	stop chan struct{}
	done chan struct{}
}

// watched is one wait as the loop reports it.
type watched struct {
	call     string  // a collective's MPI call
	what     p2pWhat // or a point-to-point wait (non-zero)
	seq      uint64  // the collective's number on its communicator
	commSize int
	since    time.Time
	told     time.Duration // how long it had waited at the last report
}

// A collSlot is one communicator's collective in progress. Collectives
// on a communicator run one at a time (Comm.coll), so each communicator
// has one slot, which its collectives set with atomic stores and no lock
// (an MPI_Allreduce of 8 bytes takes ~0.25 µs; the general begin and
// end, with their mutex, cost more). The watch's loop times every
// operation from the first check that sees it in progress, so a report
// or the timeout comes up to one check interval (a quarter of the
// shorter of the two) later than the wait began.
type collSlot struct {
	seq  atomic.Uint64        // the collective in progress, 0 when none
	name atomic.Pointer[byte] // its call's name (unsafe.StringData), valid while seq is
	nlen atomic.Int64
	size int

	// The loop's own, under watch.mu.
	seen   uint64    // the collective it last saw in progress
	seenAt time.Time // when it first saw it
	told   time.Duration
}

// collSlot returns a new slot for a communicator of size ranks, or nil
// when the watch is off.
func (w *watch) collSlot(size int) *collSlot {
	if !w.on() {
		return nil
	}
	s := &collSlot{size: size}
	w.mu.Lock()
	w.colls = append(w.colls, s)
	w.mu.Unlock()
	return s
}

// dropSlot forgets a freed communicator's slot.
func (w *watch) dropSlot(s *collSlot) {
	if s == nil {
		return
	}
	w.mu.Lock()
	w.colls = slices.DeleteFunc(w.colls, func(x *collSlot) bool { return x == s })
	w.mu.Unlock()
}

func (s *collSlot) begin(call string, seq uint64) {
	s.setName(call)
	s.seq.Store(seq)
}

// setName records the name of the collective about to begin. A
// communicator runs the same few calls over and over: the name is stored
// (two locked instructions) only when it changes. Only this
// communicator's collectives store it, so the loads see its value.
func (s *collSlot) setName(call string) {
	if p, n := unsafe.StringData(call), int64(len(call)); s.name.Load() != p || s.nlen.Load() != n {
		s.name.Store(p)
		s.nlen.Store(n)
	}
}

func (s *collSlot) end() { s.seq.Store(0) }

func newWatch(report, timeout time.Duration, rank, size int) *watch {
	w := &watch{report: report, timeout: timeout, rank: rank, size: size, out: os.Stderr, exit: os.Exit,
		stop: make(chan struct{}), done: make(chan struct{})}
	if report <= 0 && timeout <= 0 {
		close(w.done)
		return w
	}
	go w.loop()
	return w
}

// p2pSlots is how many point-to-point waits the watch records in
// lock-free slots; more at once (goroutines each blocked in a receive)
// go to its locked list.
const (
	p2pSlotBits = 6
	p2pSlots    = 1 << p2pSlotBits
)

// A p2pSlot records one point-to-point wait. A goroutine claims a free
// slot by moving state from even to odd with a compare-and-swap, stores
// what it waits for (unless the slot holds it already), and frees the
// slot by adding one: two or three locked instructions per wait and no
// clock read, ~13.5 ns where the locked list's mutex, slices and two
// critical sections cost ~28 ns (BenchmarkWatchP2P; an 8-byte ping-pong
// round trip is ~1.5 µs under mpirun on 2 ranks). state's odd values
// number the waits of the slot, so the watch's loop, which times each
// wait from the first check that sees it, tells a new wait from one it
// has seen.
type p2pSlot struct {
	state atomic.Uint64
	what  atomic.Uint64 // the wait's p2pWhat, stored after the claim

	// The loop's own, under watch.mu.
	seen   uint64 // the wait it last saw in progress (state)
	seenAt time.Time
	told   time.Duration
	_      [8]byte // one cache line per slot: waiting goroutines do not share one
}

// A p2pKind is the call a point-to-point wait is in.
type p2pKind uint8

const (
	p2pSend p2pKind = iota + 1
	p2pSsend
	p2pRecv
	p2pSendrecv
	p2pProbe
	p2pMprobe
	p2pMrecv
	p2pWaitIsend
	p2pWaitIrecv
	p2pWaitSendInit
	p2pWaitRecvInit
	p2pSendrecvReplace
	p2pWaitSendrecv        // the Wait of a Sendrecv's send (sendrecvSplit)
	p2pWaitSendrecvReplace // the same for SendrecvReplace
	p2pKinds               // at most 16: a p2pWhat keeps the kind in 4 bits
)

// p2pNames name the kinds in reports; a send's peer is its destination,
// every other's the source.
var p2pNames = [p2pKinds]string{"", "Send", "Ssend", "Recv", "Sendrecv receiving", "Probe", "Mprobe", "Message.Recv",
	"Wait for an Isend", "Wait for an Irecv", "Wait for a persistent send", "Wait for a persistent receive",
	"SendrecvReplace receiving", "Sendrecv sending", "SendrecvReplace sending"}

func (k p2pKind) sends() bool {
	switch k {
	case p2pSend, p2pSsend, p2pWaitIsend, p2pWaitSendInit, p2pWaitSendrecv, p2pWaitSendrecvReplace:
		return true
	}
	return false
}

// A p2pWhat is a point-to-point wait as one word, so that recording it
// is one atomic store: the kind in the top 4 bits, the peer plus one in
// the next 28 (0: any source; all ones: a rank past 2^28-2), the tag
// plus one in the low 32 (0: any tag; tags are at most MPI_TAG_UB,
// which fits an int).
type p2pWhat uint64

const p2pPeerBits = 28

func p2p(k p2pKind, peer, tag int) p2pWhat {
	p := uint64(peer + 1)
	if peer < -1 || p >= 1<<p2pPeerBits { // checkP2P let only AnySource (-1) below 0 through
		p = 1<<p2pPeerBits - 1
	}
	return p2pWhat(uint64(k)<<60 | p<<32 | uint64(uint32(tag+1)))
}

func (w p2pWhat) kind() p2pKind { return p2pKind(w >> 60) }

// tag is the wait's tag (comm.AnyTag for any).
func (w p2pWhat) tag() int { return int(uint32(w)) - 1 }

// peers is the wait's peer and tag, for an error (p2pErr).
func (w p2pWhat) peers() peers {
	p := int(uint64(w)>>32&(1<<p2pPeerBits-1)) - 1 // AnySource for 0
	if p == 1<<p2pPeerBits-2 {
		p = peerPast
	}
	if w.kind().sends() {
		return sendTo(p, w.tag())
	}
	return recvFrom(p, w.tag())
}

// String describes the wait: "Recv from rank 1, tag 0".
func (w p2pWhat) String() string {
	k := w.kind()
	name := "point-to-point call"
	if k < p2pKinds {
		name = p2pNames[k]
	}
	dir := "from"
	if k.sends() {
		dir = "to"
	}
	peer := "any rank"
	switch p := uint64(w) >> 32 & (1<<p2pPeerBits - 1); p {
	case 0:
	case 1<<p2pPeerBits - 1:
		peer = "a rank past 2^28"
	default:
		peer = fmt.Sprintf("rank %d", p-1)
	}
	tag := "any tag"
	if t := uint32(w); t != 0 {
		tag = fmt.Sprintf("tag %d", t-1)
	}
	return fmt.Sprintf("%s %s %s, %s", name, dir, peer, tag)
}

// on reports whether the watch records anything.
func (w *watch) on() bool { return w != nil && (w.report > 0 || w.timeout > 0) }

// beginP2P records a point-to-point wait that may block and returns its
// id for endP2P (-1 when the watch is off). Every blocking send,
// receive, probe and request wait is recorded, on the blocking and the
// polled path alike.
func (w *watch) beginP2P(what p2pWhat) int {
	if !w.on() {
		return -1
	}
	// The search starts at a slot chosen by what, so that a wait finds
	// its own description there from the last time (a loop's Recv from
	// one peer) and skips the store.
	start := int(uint64(what) * 0x9e3779b97f4a7c15 >> (64 - p2pSlotBits))
	for j := range p2pSlots {
		i := (start + j) % p2pSlots
		s := &w.p2p[i]
		if v := s.state.Load(); v&1 == 0 && s.state.CompareAndSwap(v, v+1) {
			if s.what.Load() != uint64(what) {
				s.what.Store(uint64(what))
			}
			return i
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var i int
	if n := len(w.free); n > 0 {
		i = w.free[n-1]
		w.free = w.free[:n-1]
	} else {
		i = len(w.ops)
		w.ops = append(w.ops, watched{})
	}
	w.ops[i] = watched{what: what}
	return p2pSlots + i
}

// endP2P removes the wait beginP2P recorded.
func (w *watch) endP2P(i int) {
	if i < 0 {
		return
	}
	if i < p2pSlots {
		w.p2p[i].state.Add(1)
		return
	}
	i -= p2pSlots
	w.mu.Lock()
	w.ops[i] = watched{}
	w.free = append(w.free, i)
	w.mu.Unlock()
}

func (w *watch) tick() time.Duration {
	t := time.Second
	for _, d := range []time.Duration{w.report, w.timeout} {
		if d > 0 && d/4 < t {
			t = max(d/4, time.Millisecond)
		}
	}
	return t
}

func (w *watch) loop() {
	defer close(w.done)
	tk := time.NewTicker(w.tick())
	defer tk.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tk.C:
		}
		w.check(time.Now())
	}
}

// check reports the operations stuck at now, and ends the process past
// the timeout.
func (w *watch) check(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.colls {
		seq := s.seq.Load()
		if seq == 0 {
			s.seen = 0
			continue
		}
		if seq != s.seen {
			s.seen, s.seenAt, s.told = seq, now, 0
		}
		name := unsafe.String(s.name.Load(), int(s.nlen.Load()))
		if s.seq.Load() != seq {
			continue // it ended meanwhile: the name may be the next one's
		}
		op := watched{call: name, seq: seq, commSize: s.size, since: s.seenAt, told: s.told}
		if !w.checkOne(&op, now) {
			return
		}
		s.told = op.told
	}
	for i := range w.p2p {
		s := &w.p2p[i]
		v := s.state.Load()
		if v&1 == 0 {
			continue
		}
		if v != s.seen {
			s.seen, s.seenAt, s.told = v, now, 0
		}
		op := watched{what: p2pWhat(s.what.Load()), since: s.seenAt, told: s.told}
		if s.state.Load() != v {
			continue // it ended meanwhile: what may be the next one's
		}
		if !w.checkOne(&op, now) {
			return
		}
		s.told = op.told
	}
	for i := range w.ops {
		op := &w.ops[i]
		if op.what == 0 {
			continue
		}
		if op.since.IsZero() {
			op.since = now
		}
		if !w.checkOne(op, now) {
			return
		}
	}
}

// checkOne reports op if it has waited a report interval more since the
// last report, and ends the process past the timeout (reporting false).
func (w *watch) checkOne(op *watched, now time.Time) bool {
	waited := now.Sub(op.since)
	why := "a rank that returned early, failed or called another collective leaves the others waiting: see the other ranks' output"
	if op.what != 0 {
		why = "a peer that returned early, failed or never makes the matching call leaves this rank waiting: see its output"
	}
	if w.timeout > 0 && waited >= w.timeout {
		fmt.Fprintf(w.out, "pz mpi: rank %d of %d: %s; ending the job (PZ_COMM_TIMEOUT=%v)\n", w.rank, w.size, op.describe(waited), w.timeout)
		if op.told == 0 {
			// No report said why before: the watch ran late (a loaded
			// machine) or reports are off.
			fmt.Fprintf(w.out, "pz mpi: rank %d of %d: %s\n", w.rank, w.size, why)
		}
		w.exit(TimeoutExit)
		return false
	}
	if w.report > 0 && waited-op.told >= w.report {
		op.told = waited
		fmt.Fprintf(w.out, "pz mpi: rank %d of %d: %s; %s; %s\n", w.rank, w.size, op.describe(waited), why, w.hint())
	}
	return true
}

// hint ends a report: what bounds the wait, or how to bound it.
func (w *watch) hint() string {
	if w.timeout > 0 {
		return fmt.Sprintf("the job ends after %v (PZ_COMM_TIMEOUT)", w.timeout)
	}
	return "set PZ_COMM_TIMEOUT (or pzrun -comm-timeout) to end the job after a bound"
}

func (op *watched) describe(waited time.Duration) string {
	what := op.call
	if op.what != 0 {
		what = op.what.String()
	} else if op.seq > 0 {
		what = fmt.Sprintf("%s (collective #%d on a communicator of %d ranks)", op.call, op.seq, op.commSize)
	}
	return fmt.Sprintf("waiting %v in %s", waited.Round(time.Millisecond), what)
}

// finalizing watches this rank's MPI_Finalize, which waits for every
// rank to call it: a rank that returned while another still waits for it
// in a collective or a receive waits there for ever, and said nothing.
// Past each report interval it says where it waits, and past the
// timeout it ends the process (TimeoutExit), which ends the job. stop
// ends the watch once MPI_Finalize has returned.
func (w *watch) finalizing() (stop func()) {
	if w == nil || (w.report <= 0 && w.timeout <= 0) {
		return func() {}
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		start := time.Now()
		var told time.Duration
		tick := time.NewTicker(w.tick())
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				waited := now.Sub(start)
				if w.timeout > 0 && waited >= w.timeout {
					fmt.Fprintf(w.out, "pz mpi: rank %d of %d: waiting %v in MPI_Finalize; ending the job (PZ_COMM_TIMEOUT=%v)\n", w.rank, w.size, waited.Round(time.Millisecond), w.timeout)
					w.exit(TimeoutExit)
					return
				}
				if w.report > 0 && waited-told >= w.report {
					told = waited
					fmt.Fprintf(w.out, "pz mpi: rank %d of %d: waiting %v in MPI_Finalize: this rank is done, and MPI_Finalize waits for every rank to call it "+
						"(a rank that still waits for this one in a collective or a receive never will: see the other ranks' output); %s\n",
						w.rank, w.size, waited.Round(time.Millisecond), w.hint())
				}
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// close stops the watch.
func (w *watch) close() {
	if w == nil {
		return
	}
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// beginP2P records a point-to-point wait made with ctx (see
// watch.beginP2P), unless ctx is idle by design (comm.Idle).
func (c *Comm) beginP2P(ctx context.Context, what p2pWhat) int {
	if !c.st.watch.on() || comm.IsIdle(ctx) {
		return -1
	}
	return c.st.watch.beginP2P(what)
}
