//go:build mpi

package mpi

/*
#include "pz_mpi.h"
#include "pz_agree.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/pzgo/pz/comm"
)

// Comm is an MPI communicator. It implements comm.Comm.
//
// Thread safety: MPI runs at MPI_THREAD_MULTIPLE, so point-to-point calls
// from several goroutines go to MPI directly and concurrently. Collectives
// on one Comm are ordered by a mutex held by the calling goroutine for the
// call (agreement step and operation): two goroutines calling collectives
// at once are serialized instead of interleaving inside MPI, although the
// order in which they run must still match across ranks. No goroutine is
// started and no OS thread is locked: MPI_THREAD_MULTIPLE lets any thread
// call MPI, and a hand-off to a dedicated goroutine would add two goroutine
// switches (about 0.3 us) to every call. On an adopted MPI that provides
// only MPI_THREAD_SERIALIZED every MPI call is made under one lock instead,
// and blocking operations are polled (see the package doc).
//
// Context: a point-to-point call with a ctx whose Done channel is nil
// (context.Background) uses the blocking MPI function; otherwise it starts
// the non-blocking form and tests it until it completes or ctx is done.
// A collective takes the form of the communicator (WithBlocking), the
// same on every rank whatever ctx each passes, since MPI does not match a
// blocking collective with a non-blocking one: by default the
// non-blocking function, waited for with MPI_Wait when ctx cannot end and
// tested until ctx is done otherwise. MPI cannot cancel a
// started collective: on cancellation the call returns an error wrapping
// ctx.Err() and comm.ErrBroken, the operation stays with MPI (its buffers
// pinned until MPI completes it, which may never happen) and every later
// call on this Comm returns ErrBroken. In particular a rank that never
// arrives makes the others wait until their deadline; MPI gives no way to
// learn which ranks are missing, so the error cannot name them. Abort is the
// way out of a broken job.
type Comm struct {
	st         *state
	h          *C.pz_handles
	c          C.MPI_Comm
	rank, size int
	world      bool
	cu, byteU  C.uintptr_t // c and MPI_BYTE as integers, for the calls that take them so (pz_isend_u)

	coll  sync.Mutex // held for the duration of a collective
	check bool       // run the agreement step; guarded by coll
	block bool       // collectives call MPI's blocking functions (WithBlocking); guarded by coll
	// Scratch for the agreement step and count exchanges, guarded by coll.
	agree    *[2]C.pz_agree_t   // in, out
	blockPay [agreePayload]byte // agreeBlocks' payload, under coll
	i64      []int64
	cnts     []C.int
	displs   []C.int
	cnts2    []C.int
	displs2  []C.int

	broken atomic.Pointer[error]
	brk    chan struct{} // closed when broken is set: the non-blocking collectives' requests (nbcRequest) watch it
	freed  atomic.Bool
	seq    uint64 // collectives started, for the watch's reports; guarded by coll

	nbc     *comm.NBC // runs the non-blocking collectives; made by the first one, guarded by coll
	wslot   *collSlot // the watch's record of the collective in progress; made by the first, guarded by coll
	creq    *request  // the request of the collectives in the non-blocking form, reused (collRequest); guarded by coll
	nbcComm *Comm     // their communicator: a duplicate made with this one (nil for that duplicate itself)
	nbcMu   sync.Mutex
	nbcLast <-chan struct{} // the Done of the engine's request last started (nbcRequest.prev); guarded by nbcMu
}

var _ comm.Comm = (*Comm)(nil)

func newComm(st *state, c C.MPI_Comm, world, check bool) (*Comm, error) {
	var rank, size C.int
	st.lock()
	rc := C.pz_comm_setup(c, st.h.errors_return, &rank, &size)
	st.unlock()
	if rc != 0 {
		return nil, st.error("MPI_Comm_set_errhandler", rc)
	}
	n := int(size)
	m := &Comm{st: st, h: &st.h, c: c, rank: int(rank), size: n, world: world, check: check, block: st.block,
		cu: C.pz_comm_u(c), byteU: C.pz_type_u(st.h.byte),
		brk: make(chan struct{}), agree: new([2]C.pz_agree_t), i64: make([]int64, 3*n), cnts: make([]C.int, n), displs: make([]C.int, n),
		cnts2: make([]C.int, n), displs2: make([]C.int, n)}
	if !world {
		st.addComm(m)
	}
	return m, nil
}

// Rank is this process's rank in the communicator.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks in the communicator.
func (c *Comm) Size() int { return c.size }

func (c *Comm) usable(call string) error {
	if c.st.finalized.Load() {
		return fmt.Errorf("mpi: %s on rank %d: %w (%w)", call, c.rank, ErrFinalized, comm.ErrFreed)
	}
	if c.freed.Load() {
		return fmt.Errorf("mpi: %s on rank %d: %w", call, c.rank, comm.ErrFreed)
	}
	if e := c.broken.Load(); e != nil {
		return fmt.Errorf("mpi: %s on rank %d: %w", call, c.rank, *e)
	}
	return nil
}

// breakWith marks c broken by cause and returns the error of the call
// that broke it, which wraps cause. The error of later calls names cause
// but wraps it only when it is no context's error: a later call has a
// context of its own, which a wrapped context.DeadlineExceeded would
// seem to say had ended.
//
// The first break closes c.brk, which ends the requests of the
// non-blocking collectives pending on c (nbcRequest) with c's error:
// they used to wait for ever for ranks that would not start them. Their
// engine still runs every collective this rank started, in order, on c's
// duplicate (which stays intact), so that they keep matching the other
// ranks' and leave MPI once those start theirs.
func (c *Comm) breakWith(cause error) error {
	e := fmt.Errorf("%w: %w", comm.ErrBroken, cause)
	later := e
	if errors.Is(cause, context.Canceled) || errors.Is(cause, context.DeadlineExceeded) {
		later = fmt.Errorf("%w: an earlier collective was abandoned: %v", comm.ErrBroken, cause)
	}
	if c.broken.CompareAndSwap(nil, &later) && c.brk != nil {
		close(c.brk)
	}
	return e
}

func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

func cints(s []C.int) *C.int { return unsafe.SliceData(s) }

// blocks reports whether a point-to-point operation with ctx calls MPI's
// blocking function: ctx cannot be canceled, and MPI takes calls from
// several threads at once (not MPI_THREAD_SERIALIZED, where every call
// holds the lock and a blocking one would keep the others out). Otherwise
// it starts the non-blocking form and polls. The choice is this rank's
// alone: a blocking send or receive matches a non-blocking one.
func (c *Comm) blocks(ctx context.Context) bool { return ctx.Done() == nil && !c.st.serialize }

// collBlocks reports whether a collective on c calls MPI's blocking
// function: c's form (c.block, the same on every rank; never at
// MPI_THREAD_SERIALIZED), whatever kind of ctx this rank passes. MPI does
// not match a blocking collective with a non-blocking one, so a choice
// made per call from ctx (the blocking call with context.Background, as
// before) hung a rank passing Background and one passing a ctx that can
// end in their first collective. A ctx that has ended takes the polled
// path, which returns its error before any MPI call. c.coll is held.
func (c *Comm) collBlocks(ctx context.Context) bool {
	return c.block && (ctx.Done() == nil || ctx.Err() == nil)
}

// yieldPeriod is how many blocking MPI calls go by between two yields of
// the calling goroutine's processor (yieldEvery).
const yieldPeriod = 64

// yieldEvery yields the processor (runtime.Gosched) when n, a count of
// blocking MPI calls, is a multiple of yieldPeriod. A goroutine that makes
// blocking cgo calls back to back is never rescheduled, and once it has run
// 10 ms on one scheduling tick the runtime's monitor thread (sysmon) takes
// its processor in the middle of a call and polls every 20 µs for a
// millisecond or more, about 5,000 wake-ups a second. Under mpirun every
// thread of a rank is bound to the core on which MPI spins, so each wake-up
// stalls the rank and every rank waiting on it: 8-byte AllReduces back to
// back on 2 ranks took 1.9 µs each, C's 0.67 (docs/performance.md, "Yielding
// between blocking calls"). A yield every few dozen calls starts a new
// tick for ~0.2 µs.
func yieldEvery(n uint64) {
	if n%yieldPeriod == 0 {
		runtime.Gosched()
	}
}

// do runs one MPI operation: a collective (coll) in c's form
// (collBlocks), a point-to-point call blocking with a ctx that cannot be
// canceled (blocks); otherwise it starts the operation and waits for it
// (startAndPoll). pins are the memory MPI uses until completion.
// A collective abandoned on ctx breaks the communicator.
func (c *Comm) do(ctx context.Context, call string, coll bool, block func() C.int, start func(*C.MPI_Request) C.int, pins ...unsafe.Pointer) error {
	return c.doSized(ctx, call, coll, 0, block, start, pins...)
}

// doSized is do for an operation that moves about nbytes through this
// rank: polling spins while they could still be moving (spinFor).
//
// The blocking path is the one small calls take, and it is kept free of
// defers: a deferred call that the compiler cannot open-code (doSized's
// returns times its defers are past its limit) cost ~25 ns a call, a
// tenth of an 8-byte AllReduce on 2 ranks. A panic cannot come out of the
// C call, so nothing is left unrecorded.
func (c *Comm) doSized(ctx context.Context, call string, coll bool, nbytes int, block func() C.int, start func(*C.MPI_Request) C.int, pins ...unsafe.Pointer) error {
	if coll && c.collBlocks(ctx) || !coll && c.blocks(ctx) {
		var rc C.int
		if s := c.collSlotOf(coll); s != nil {
			s.begin(call, c.seq)
			rc = block()
			s.end()
		} else {
			rc = block() // a point-to-point call's caller watches it (watch.beginP2P)
		}
		if coll {
			yieldEvery(c.seq)
		} else {
			c.st.paceP2P()
		}
		if rc != 0 {
			return fmt.Errorf("mpi: %w", c.st.error(call, rc))
		}
		return nil
	}
	return c.startAndPoll(ctx, call, coll, nbytes, start, pins...)
}

// collSlotOf counts a collective (coll) on c and returns the watch's
// slot for c (nil when the watch is off, and for a point-to-point call).
// Collectives on c run one at a time (c.coll is held), so the count and
// the slot need no lock of their own.
func (c *Comm) collSlotOf(coll bool) *collSlot {
	if !coll {
		return nil
	}
	c.seq++
	if c.wslot == nil {
		c.wslot = c.st.watch.collSlot(c.size)
	}
	return c.wslot
}

// stepDone ends a collective's blocking call made through collSlotU: it
// keeps the watch's slot alive to here (the call stored into it), counts
// the call for yieldEvery and returns the error of rc (nil for 0). The
// caller keeps its buffers alive itself.
func (c *Comm) stepDone(call string, rc C.int) error {
	runtime.KeepAlive(c.wslot)
	yieldEvery(c.seq)
	if rc != 0 {
		return fmt.Errorf("mpi: %w", c.st.error(call, rc))
	}
	return nil
}

// collSlotU is collSlotOf for a collective whose C call stores its
// sequence number (c.seq) into the watch's slot itself: it names the call
// and returns the address of the slot's number, or 0 when the watch is
// off. The caller keeps c.wslot alive across the call.
func (c *Comm) collSlotU(call string) C.uintptr_t {
	s := c.collSlotOf(true)
	if s == nil {
		return 0
	}
	s.setName(call)
	return C.uintptr_t(uintptr(unsafe.Pointer(&s.seq)))
}

// startAndPoll starts an operation and polls it to completion or until
// ctx ends; a collective whose ctx cannot end (context.Background) waits
// in MPI_Wait instead, as the blocking call it replaces would (unless MPI
// serializes the calls: a wait would hold the lock). A collective is
// watched here, a point-to-point call by its caller.
func (c *Comm) startAndPoll(ctx context.Context, call string, coll bool, nbytes int, start func(*C.MPI_Request) C.int, pins ...unsafe.Pointer) error {
	if s := c.collSlotOf(coll); s != nil {
		s.begin(call, c.seq)
		defer s.end()
	}
	if ctx.Err() != nil {
		err := ctxErr(ctx)
		if coll {
			err = c.breakWith(err)
		}
		return fmt.Errorf("mpi: %s: %w", call, err)
	}
	var r *request
	if coll {
		r = c.collRequest(call, pins...)
	} else {
		r = newRequest(c, call, false, pins...)
	}
	c.st.lock()
	rc := start(r.req)
	c.st.unlock()
	if rc != 0 {
		r.release()
		return fmt.Errorf("mpi: %w", c.st.error(call, rc))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if coll && ctx.Done() == nil && !c.st.serialize && !r.ending() {
		rc := C.pz_wait_u(r.reqU(), C.uintptr_t(uintptr(unsafe.Pointer(&r.cst))))
		r.complete(rc, &r.cst) // r is alive: C had the address of its field
		return r.err
	}
	if err := poll(ctx, spinFor(nbytes), r.test); err != nil {
		if coll {
			err = c.breakWith(err)
		}
		return fmt.Errorf("mpi: %s: %w", call, err)
	}
	return r.err
}

// Split partitions the ranks by color (MPI_Comm_split). MPI_Comm_split has
// no non-blocking form: a step honouring ctx and then a vote that every
// rank is still there run first, so that every rank has arrived before the
// blocking call. The step is the agreement step with the check on, and
// with it off a barrier, run unless c's collectives take the blocking
// form (WithBlocking; never at MPI_THREAD_SERIALIZED), whatever ctx. A
// rank whose ctx ends there returns its error wrapping comm.ErrBroken,
// and the others' Split, once they call it, an
// error wrapping ErrAbandoned and comm.ErrBroken: no rank calls
// MPI_Comm_split, and c is broken on every rank (syncBefore). The same
// holds for SplitShared and Dup.
func (c *Comm) Split(ctx context.Context, color, key int) (comm.Comm, error) {
	if err := c.usable("Split"); err != nil {
		return nil, err
	}
	lerr := comm.CheckSplit(callSplit.String(), c.rank, color, key)
	c.coll.Lock()
	defer c.coll.Unlock()
	if err := c.syncBefore(ctx, callSplit, "MPI_Comm_split", lerr); err != nil {
		return nil, err
	}
	mcolor := C.int(color)
	if color == comm.Undefined {
		mcolor = c.h.undefined
	}
	var nc C.MPI_Comm
	c.st.lock()
	rc := C.pz_comm_split(c.c, mcolor, C.int(key), &nc)
	c.st.unlock()
	if rc != 0 {
		return nil, fmt.Errorf("mpi: Split: %w", c.st.error("MPI_Comm_split", rc))
	}
	if nc == c.h.null {
		return nil, nil
	}
	sub, err := newComm(c.st, nc, false, c.check)
	if err == nil {
		sub.block = c.block
		err = sub.withEngine()
	}
	if err != nil {
		return nil, fmt.Errorf("mpi: Split: %w", err)
	}
	return sub, nil
}

// mpiComm returns c (also for a *World, which embeds it).
func (c *Comm) mpiComm() *Comm { return c }

// Compare implements comm.Compare (MPI_Comm_compare).
func (c *Comm) Compare(other comm.Comm) (comm.Relation, error) {
	oc, ok := other.(interface{ mpiComm() *Comm })
	if !ok {
		return comm.Unequal, fmt.Errorf("%w: Compare: %T is not an MPI communicator", comm.ErrInvalidArg, other)
	}
	o := oc.mpiComm()
	// A freed handle is MPI_COMM_NULL, which MPI_Comm_compare refuses with
	// a bare MPI_ERR_COMM: say which one and why, as comm/local does.
	for _, x := range []struct {
		which string
		c     *Comm
	}{{"the first", c}, {"the second", o}} {
		if x.c.st.finalized.Load() {
			return comm.Unequal, fmt.Errorf("mpi: Compare on rank %d: %s communicator: %w (%w)", c.rank, x.which, ErrFinalized, comm.ErrFreed)
		}
		if x.c.freed.Load() {
			return comm.Unequal, fmt.Errorf("mpi: Compare on rank %d: %s communicator: %w (compare before Free)", c.rank, x.which, comm.ErrFreed)
		}
	}
	var rel C.int
	c.st.lock()
	rc := C.pz_comm_compare(c.c, o.c, &rel)
	c.st.unlock()
	if rc != 0 {
		return comm.Unequal, fmt.Errorf("mpi: Compare: %w", c.st.error("MPI_Comm_compare", rc))
	}
	return comm.Relation(rel), nil
}

// SplitShared returns a communicator of the ranks of c that share this
// node's memory (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED), ordered by
// key, then by rank in c. Every rank of c must call it.
func (c *Comm) SplitShared(ctx context.Context, key int) (comm.Comm, error) {
	if err := c.usable("SplitShared"); err != nil {
		return nil, err
	}
	var lerr error
	if key < math.MinInt32 || key > math.MaxInt32 {
		lerr = c.argErr(callSplitShared, "key %d outside MPI's int range", key)
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	if err := c.syncBefore(ctx, callSplitShared, "MPI_Comm_split_type", lerr); err != nil {
		return nil, err
	}
	var nc C.MPI_Comm
	c.st.lock()
	rc := C.pz_comm_split_shared(c.c, C.int(key), &nc)
	c.st.unlock()
	if rc != 0 {
		return nil, fmt.Errorf("mpi: SplitShared: %w", c.st.error("MPI_Comm_split_type", rc))
	}
	sub, err := newComm(c.st, nc, false, c.check)
	if err == nil {
		sub.block = c.block
		err = sub.withEngine()
	}
	if err != nil {
		return nil, fmt.Errorf("mpi: SplitShared: %w", err)
	}
	return sub, nil
}

// syncBefore makes every rank arrive before a blocking-only MPI call
// (mpiCall); its errors name k (collErr). It is needed when ctx can end
// (the wait for the others is then one that ctx ends) and when every MPI
// call holds the lock (MPI_THREAD_SERIALIZED): a blocking call that
// waited there for a rank not yet arrived would keep this rank's other
// goroutines out of MPI, and that rank might be waiting for one of them
// (a message before its own call). Once all have arrived, the blocking
// call waits only for ranks already making it.
//
// The ranks pass the gate there (state.gate: a first step, then a vote
// that every rank is still there), which ctx bounds. With the check off
// the first step is a barrier, run unless c's collectives block
// (collBlocks: the same on every rank, whatever ctx);
// with it on it is the agreement step (which finds a rank making another
// collective, and runs whatever the ctx), and when every rank's
// descriptor is the same the vote follows. Before, a barrier or
// agreement step that ctx ended on one rank completed on the others,
// which went on into the blocking call and waited there for good. A rank
// whose ctx ends in the gate breaks c (as any abandoned collective does),
// and so do the others' calls, which fail with ErrAbandoned, so that c is
// broken on every rank: the doc of comm says that an abandoned collective
// breaks the communicator, and this one can be reported to every rank.
func (c *Comm) syncBefore(ctx context.Context, k call, mpiCall string, lerr error) error {
	if c.block && c.size > 1 && ctx.Err() != nil {
		// The blocking form runs no polled step: the other ranks enter
		// the blocking agreement step (or, with the check off, mpiCall)
		// at once, and the polled step this rank's ended ctx used to
		// take (an MPI_Iallreduce, an MPI_Ibarrier) did not match them.
		// As any collective in this form, this one makes no MPI call.
		return c.collErr(k, c.breakWith(ctxErr(ctx)))
	}
	if c.check && c.size > 1 {
		d := desc{call: k, count: noCount, root: noRoot}
		in := &c.agree[0]
		setHeader(in, agreeVector(d, c.rank, c.size, lerr, 0))
		in.pay, in.root = 0, 0
		if err := c.gate(ctx, k, mpiCall, true); err != nil {
			return err
		}
		failRank, same := agreed(header(&c.agree[1]), c.size)
		if failRank < 0 && same {
			return nil
		}
		return c.collErr(k, c.explain(ctx, d, failRank, lerr))
	}
	if lerr != nil {
		return lerr
	}
	if c.collBlocks(ctx) || c.size == 1 {
		return nil
	}
	return c.gate(ctx, k, mpiCall, false)
}

// gate runs state.gate on c before collective k's mpiCall, counted and
// watched as one collective, its first step the agreement step (agree,
// on c.agree) or a barrier, and breaks c on every rank when one gave up.
func (c *Comm) gate(ctx context.Context, k call, mpiCall string, agree bool) error {
	var elems *[2]C.pz_agree_t
	name := "MPI_Ibarrier"
	if agree {
		elems, name = c.agree, agreeNames[k]
	}
	if s := c.collSlotOf(true); s != nil {
		s.begin(name, c.seq)
		defer s.end()
	}
	err := c.st.gate(ctx, c.c, k.String(), mpiCall, elems, c.size, c.collBlocks(ctx), ErrAbandoned,
		"the communicator is broken on every rank (comm.ErrBroken)")
	if err == nil {
		return nil
	}
	if ctx.Err() != nil || errors.Is(err, ErrAbandoned) {
		err = c.breakWith(err)
	}
	return c.collErr(k, err)
}

// SetCheck turns the cross-rank agreement step of this communicator's
// collectives on or off (see WithCheck); communicators split from it
// inherit the setting. Every rank must call it at the same point of its
// sequence of collectives, or the ranks' next collectives will not match.
func (c *Comm) SetCheck(on bool) {
	c.coll.Lock()
	c.check = on
	c.coll.Unlock()
}

// Check reports whether collectives on c run the agreement step.
func (c *Comm) Check() bool {
	c.coll.Lock()
	defer c.coll.Unlock()
	return c.check
}

// Blocking reports whether collectives on c call MPI's blocking functions
// (WithBlocking, PZ_COMM_BLOCKING, inherited from the communicator c was
// made from) rather than the non-blocking ones waited for: the form every
// rank of c uses. It is false at MPI_THREAD_SERIALIZED, where collectives
// are always polled. A benchmark says with it which form it measured.
func (c *Comm) Blocking() bool {
	c.coll.Lock()
	defer c.coll.Unlock()
	return c.block
}

// Abort aborts every process of the job (MPI_Abort on this communicator;
// Open MPI ends the whole job). It returns only if MPI_Abort fails. At
// MPI_THREAD_SERIALIZED it takes the lock of MPI calls, which polled
// waits hold only for each test; if a goroutine keeps it for a second
// (inside MPI_Comm_dup or MPI_Comm_split, which wait for ranks that may
// never come), Abort calls MPI_Abort without it rather than wait for
// ever.
func (c *Comm) Abort(code int) error {
	if c.st.finalized.Load() {
		return fmt.Errorf("mpi: Abort: %w", ErrFinalized)
	}
	var rc C.int
	if c.st.lockWithin(abortLockWait) {
		rc = C.pz_abort(c.c, C.int(code))
		c.st.unlock()
	} else {
		// A goroutine holds the lock inside a blocking MPI call that
		// waits for other ranks (MPI_Comm_dup, MPI_Comm_split: they
		// have no polled form): ending the job matters more than the
		// serialization, which that call would otherwise keep Abort
		// from for ever.
		rc = C.pz_abort(c.c, C.int(code))
	}
	return fmt.Errorf("mpi: Abort: %w", c.st.error("MPI_Abort", rc))
}

// abortLockWait bounds how long Abort waits for the lock of an MPI at
// MPI_THREAD_SERIALIZED. Polled waits hold it only for each test.
const abortLockWait = time.Second

// lockWithin takes s's lock, waiting for it up to d; it reports whether
// it did (always, when s does not serialize).
func (s *state) lockWithin(d time.Duration) bool {
	if !s.serialize {
		return true
	}
	deadline := time.Now().Add(d)
	for !serialMu.TryLock() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Microsecond)
	}
	return true
}

// Free releases the communicator (MPI_Comm_free, collective). The world
// communicator is only marked freed; a broken one is marked freed without
// calling MPI, whose pending operations on it may never complete. Freeing
// twice returns ErrFreed.
//
// The requests of this rank's point-to-point operations still pending on
// c complete first, with an error wrapping comm.ErrFreed, so that no
// Wait on them waits for ever: a receive (Irecv, a started persistent
// receive) is canceled (MPI_Cancel), unless it had matched its message
// before, when it completes as usual (Free waits for it, up to 2 seconds);
// a send, which MPI cannot cancel, is handed to MPI (MPI_Request_free):
// it may still be delivered, and its buffer stays pinned for good. A
// matched message (Improbe, Mprobe) not yet received is dropped by its
// Recv, which returns comm.ErrFreed. A Wait already blocked inside
// MPI_Wait on a send (its ctx cannot be canceled) returns when MPI
// completes the send.
func (c *Comm) Free() error {
	if c.st.finalized.Load() {
		return fmt.Errorf("mpi: Free: %w", ErrFinalized)
	}
	c.coll.Lock()
	defer c.coll.Unlock()
	if c.freed.Swap(true) {
		return fmt.Errorf("mpi: Free: %w", comm.ErrFreed)
	}
	c.st.dropComm(c)
	// This rank's pending receives on c are canceled, its pending sends
	// left to MPI: their requests complete with comm.ErrFreed (end.go).
	c.st.endPending(c, time.Now().Add(endWait), false)
	c.st.watch.dropSlot(c.wslot)
	var nerr error
	if c.nbc != nil {
		nerr = c.nbc.Close() // frees nbcComm unless a collective holds it
	} else if c.nbcComm != nil {
		nerr = c.nbcComm.Free()
	}
	if c.world || c.broken.Load() != nil {
		return nerr
	}
	c.st.lock()
	rc := C.pz_comm_free(&c.c)
	c.st.unlock()
	if rc != 0 {
		return fmt.Errorf("mpi: Free: %w", c.st.error("MPI_Comm_free", rc))
	}
	return nil
}
