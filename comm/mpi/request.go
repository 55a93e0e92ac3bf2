//go:build mpi

package mpi

/*
#include <stdlib.h>
#include "pz_mpi.h"
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/pzgo/pz/comm"
)

// request is a pending non-blocking MPI operation. While MPI owns its
// buffers they are pinned, by the Pinner of the request's slot; slots are
// never freed (state.slots keeps every one), so neither a caller dropping
// the request nor an abandoned collective can let the garbage collector
// free memory MPI will still write. The pins are released and the slot
// reused when MPI reports completion. An operation that never completes
// keeps its memory until the process exits.
type request struct {
	c    *Comm
	call string
	op   string         // the pz call that made it where name cannot tell from call (Sendrecv's Isend)
	req  *C.MPI_Request // the slot's (C memory), or a persistent request's
	slot *slot          // nil for a round of a persistent request and once completed

	what  p2pWhat       // what Wait waits for, in the watch's reports
	coll  bool          // a collective's (startAndPoll): never ended by Free or Finalize (end.go)
	round bool          // a round of a persistent request, which owns req and the pins
	owner *persistent   // that persistent request
	recv  bool          // an Irecv: Status.Count is computed from the bytes
	bytes int           // what the operation moves (how long Wait polls without sleeping)
	dt    comm.Datatype // element type of an Irecv, an Isend, a persistent send or receive
	// A receive may take more than its buffer (room, bytes or more; see
	// wideRecv): what lands past the buffer tells a truncated message.
	room  int
	into  []byte         // a receive staged in C memory: the caller's buffer, filled by complete
	stage unsafe.Pointer // that C memory (the slot's, or a persistent receive's); nil when not staged

	mu      sync.Mutex  // serializes Wait and Test
	cst     C.pz_status // what MPI_Test or MPI_Wait reports, under mu (locals would escape to the heap: cgo)
	cflag   C.int       // MPI_Test's flag, under mu
	st      comm.Status
	err     error
	fin     atomic.Bool                   // the operation completed: set by complete, after st and err
	doneCh  atomic.Pointer[chan struct{}] // made by the first Done; closed once fin is set
	closed  atomic.Bool                   // doneCh was closed
	watched atomic.Bool                   // handed to the progress engine by Done

	// Cancellation of a receive (Cancel). MPI_Cancel is called by the
	// goroutine that holds mu, before it tests the request (cancelIfAsked),
	// or by Cancel itself while a Wait is blocked in MPI_Wait (blocked):
	// never while another goroutine may complete the request and give its
	// slot to another operation.
	cancelAsked atomic.Bool // Cancel was called
	blocked     atomic.Bool // a Wait is in MPI_Wait, holding mu (receives only)
	cancelMu    sync.Mutex  // guards the two below; held across MPI_Cancel
	canceled    bool        // MPI_Cancel was called (once)
	cancelErr   error       // its failure, reported by complete
	// endAsked: the receive is canceled because its communicator is
	// freed or MPI finalized (end.go); a canceled completion then
	// reports comm.ErrFreed, not comm.ErrCanceled.
	endAsked atomic.Bool
}

var _ comm.Request = (*request)(nil)

// newRequest makes the request of an operation, in a slot; coll marks a
// collective's.
func newRequest(c *Comm, call string, coll bool, pins ...unsafe.Pointer) *request {
	r := &request{c: c, call: call, coll: coll}
	r.attach(pins...)
	return r
}

// collRequest returns the request of a collective in the non-blocking
// form on c (startAndPoll): c's own, reset, when the collective that last
// used it let go of its slot (it completed, or MPI refused its start),
// otherwise a new one that becomes c's. A request per call was 320 bytes
// of garbage in every small collective of the default form, where the
// blocking form allocates nothing. A collective abandoned on ctx keeps
// its slot (MPI owns its MPI_Request and the pinned buffers until it
// completes, which may never happen), so its request is never reset
// under it; c is broken then, and a later collective on c is refused
// before it gets here anyway. Nothing else keeps a collective's request:
// it is not handed to the caller, Free and Finalize skip it (end.go), and
// its slot forgets it when released (slots.put). c.coll is held.
func (c *Comm) collRequest(call string, pins ...unsafe.Pointer) *request {
	r := c.creq
	if r == nil || r.slot != nil {
		r = new(request)
		c.creq = r
	} else {
		*r = request{}
	}
	r.c, r.call, r.coll = c, call, true
	r.attach(pins...)
	return r
}

// attach gives r a slot and pins pins in it.
func (r *request) attach(pins ...unsafe.Pointer) {
	sl := r.c.st.slots.get(r)
	for _, p := range pins {
		if p != nil {
			sl.pin.Pin(p)
		}
	}
	r.req, r.slot = sl.req, sl
}

// release gives up the pins and the slot; MPI no longer owns the memory.
// A persistent request's round leaves them to Free.
func (r *request) release() {
	if r.round || r.slot == nil {
		return
	}
	r.c.st.slots.put(r.slot)
	r.slot, r.req = nil, nil
}

// slot is the memory of one pending operation, reused by the next: the
// MPI_Request that MPI writes (C memory, which cgo does not check when its
// address is passed), the Pinner of the operation's buffers, and C memory
// that small messages pass through (stageBytes, made on first use).
type slot struct {
	req   *C.MPI_Request
	pin   runtime.Pinner
	stage unsafe.Pointer
	r     *request // the operation using the slot, nil while it is free; under slots.mu
}

// stageBytes is the largest message an Isend or Irecv passes through its
// slot's C memory instead of pinning the caller's buffer for MPI: a
// Pinner's Pin and Unpin, and cgo's check of a Go pointer argument, cost
// ~0.35 µs per operation, a copy of up to 4 KiB a tenth of that.
const stageBytes = 4096

// staged reports whether an Isend or Irecv of b passes it through the
// slot's C memory.
func staged(b []byte) bool { return len(b) > 0 && len(b) <= stageBytes }

// sendFrom returns the memory an Isend of b hands MPI: a copy of b in the
// slot's C memory when b is small, else b itself, pinned until the send
// completes.
func (r *request) sendFrom(b []byte) unsafe.Pointer {
	if !staged(b) {
		return r.pinned(b)
	}
	st := r.slot.staging()
	copy(unsafe.Slice((*byte)(st), len(b)), b)
	return st
}

// recvStaged stages an Irecv into b, of at most stageBytes, in the slot's
// C memory, which starts as a copy of b and which complete copies back
// whole (so what MPI leaves unwritten - past a short message, or all of a
// truncated one for some libraries - comes back unchanged), and returns
// that memory. MPI may write all stageBytes of it (wideRecv).
func (r *request) recvStaged(b []byte) unsafe.Pointer {
	st := r.slot.staging()
	copy(unsafe.Slice((*byte)(st), len(b)), b)
	r.into, r.stage, r.room = b, st, stageBytes
	return st
}

// wideRecv reports whether a receive of n bytes from source on c is
// posted with room past its buffer: always when it is staged (n <=
// stageBytes: the room costs nothing), and when the message may come
// from the rank itself (source is this rank or AnySource). Open MPI 4.1
// truncates a small message (below its self transport's eager limit,
// about 1 KiB) that a rank sends itself to the size of a receive posted
// before it, silently: no MPI_ERR_TRUNCATE, and the status counts the
// bytes written. A message that does not fit the buffer fills room past
// it instead, which the status counts: complete reports ErrTruncated with
// the message's size (truncated). Messages between two ranks are
// truncated with MPI_ERR_TRUNCATE, and a larger receive from another
// rank goes into the buffer alone, contiguous.
func (c *Comm) wideRecv(n, source int) bool {
	return n <= stageBytes || source == c.rank || source == comm.AnySource
}

// pinned pins b's memory until the operation completes and returns it.
func (r *request) pinned(b []byte) unsafe.Pointer {
	p := ptr(b)
	if p != nil {
		r.slot.pin.Pin(p)
	}
	return p
}

// staging returns the slot's C memory for small messages, made on first
// use and kept with the slot.
func (sl *slot) staging() unsafe.Pointer {
	if sl.stage == nil {
		sl.stage = C.malloc(stageBytes)
	}
	return sl.stage
}

// slots holds every slot made, so that a slot in use stays reachable
// whatever becomes of its request (a Pinner collected with pins reports
// a leak, and the pinned buffers must outlive the operation); free are
// the slots of completed operations. A request then costs two short
// critical sections, where a Pinner, a cgo.Handle and a C.MPI_Request of
// its own cost a finalizer and three allocations (a third of an 8-byte
// halo exchange's time).
type slots struct {
	mu   sync.Mutex
	free []*slot
	all  []*slot
}

// get returns a free slot for r's operation (Free and Finalize find the
// pending operations through the slots in use: end.go).
func (s *slots) get(r *request) *slot {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.free); n > 0 {
		sl := s.free[n-1]
		s.free[n-1] = nil
		s.free = s.free[:n-1]
		sl.r = r
		return sl
	}
	sl := &slot{req: (*C.MPI_Request)(C.malloc(C.sizeof_MPI_Request)), r: r}
	s.all = append(s.all, sl)
	return sl
}

func (s *slots) put(sl *slot) {
	sl.pin.Unpin()
	s.mu.Lock()
	sl.r = nil
	s.free = append(s.free, sl)
	s.mu.Unlock()
}

// retire takes sl out of use for good, its pins and memory kept: an
// operation ended without MPI's completion (request.orphan), which MPI
// may still be reading or writing.
func (s *slots) retire(sl *slot) {
	s.mu.Lock()
	sl.r = nil
	s.mu.Unlock()
}

// complete records the outcome of the operation; r.mu is held.
func (r *request) complete(rc C.int, st *C.pz_status) {
	defer func() {
		r.fin.Store(true)
		r.closeDone()
	}()
	if st.cancelled != 0 {
		// Canceled (MPI_Test_cancelled): nothing was received, and a
		// staged buffer is not copied back.
		r.unstage()
		r.release()
		r.st = comm.Status{}
		if r.endAsked.Load() { // by Free or Finalize (end.go)
			r.err = r.endErr(false)
		} else {
			r.err = r.errf(comm.ErrCanceled)
		}
		return
	}
	if cerr := r.cancelFailure(); cerr != nil {
		// MPI_Cancel failed (where a test called it for Cancel, which
		// could not report it): the operation completed, but not as
		// the caller asked.
		defer func() {
			if r.err == nil {
				r.err = cerr
			}
		}()
	}
	if r.stage != nil { // staged: the C memory holds the buffer as MPI left it (recvStaged)
		copy(r.into, unsafe.Slice((*byte)(r.stage), len(r.into)))
	}
	r.unstage()
	r.release()
	if rc == 0 && st.error != 0 {
		// Open MPI's MPI_Test may return MPI_SUCCESS and report the
		// operation's error (e.g. truncation) in the status only.
		rc = st.error
	}
	r.st = comm.Status{Source: int(st.source), Tag: int(st.tag)}
	if !r.recv {
		r.st = r.sendStatus(rc)
	}
	if rc != 0 {
		e := r.c.st.error(r.call, rc).(*Error)
		if r.recv && e.Truncated {
			r.st.Count, r.err = truncation(st, e, r.dt, r.bytes, r.room)
		} else {
			r.err = e
		}
		r.err = r.errf(r.err)
		return
	}
	if r.recv {
		if int(st.bytes) > r.bytes { // it went past the buffer, into the room (wideRecv)
			r.st.Count, r.err = truncation(st, nil, r.dt, r.bytes, r.room)
		} else {
			r.st.Count, r.err = countOf(int(st.bytes), r.st, r.dt)
		}
		if r.err != nil {
			r.err = r.errf(r.err)
		}
	}
}

// sendStatus is the Status of a completed send, as comm/local gives it
// (MPI leaves a send's status undefined): the message's sender, this
// rank, its tag and the elements sent; empty for a failed send, and for
// a collective's request.
func (r *request) sendStatus(rc C.int) comm.Status {
	if rc != 0 || !r.what.kind().sends() || r.dt.Size() == 0 {
		return comm.Status{}
	}
	return comm.Status{Source: r.c.rank, Tag: r.what.tag(), Count: r.bytes / r.dt.Size()}
}

// unstage forgets a one-shot receive's staging once it completed; a
// persistent receive's stays for its next round.
func (r *request) unstage() {
	if !r.round {
		r.into, r.stage = nil, nil
	}
}

// name is the pz call that made the request, for its errors (r.call is
// the MPI call).
func (r *request) name() string {
	if r.op != "" {
		return r.op
	}
	switch r.call {
	case "MPI_Send":
		return "Send"
	case "MPI_Ssend":
		return "Ssend"
	case "MPI_Isend":
		return "Isend"
	case "MPI_Irecv":
		return "Irecv"
	case "MPI_Send_init":
		return "SendInit"
	case "MPI_Recv_init":
		return "RecvInit"
	}
	return r.call
}

// errf is err of r's operation, naming the call, the rank, the peer and
// the tag (p2pErr); a collective's names its MPI call.
func (r *request) errf(err error) error {
	if r.what == 0 {
		return fmt.Errorf("mpi: %s: %w", r.name(), err)
	}
	return r.c.p2pErr(r.name(), r.what.peers(), err)
}

// truncation is the Status.Count and the error of a receive of dt into a
// buffer of bytes, with room bytes of room (wideRecv; bytes where it has
// none), whose message did not fit: MPI_ERR_TRUNCATE (e), or, with e nil,
// a message that went past the buffer into the room of a wide receive.
// The error wraps comm.ErrTruncated (and e) and says both sizes as
// comm/local does, and the count is the message's, where it is known:
// the library reports the size of a message it truncated
// (PZ_TRUNCATED_SIZE: Open MPI; MPICH does not), and one that fit the
// room is counted whole; one that filled the room may be longer (a small
// message of the rank itself, which Open MPI truncates silently, when
// the room is too short). The count is 0 where the size is unknown, or
// not a whole number of elements. The caller's error names the call.
func truncation(st *C.pz_status, e *Error, dt comm.Datatype, bytes, room int) (int, error) {
	sz, n, src := dt.Size(), int(st.bytes), int(st.source)
	wrap := func(count int, format string, args ...any) (int, error) {
		err := fmt.Errorf("%w: "+format, append([]any{comm.ErrTruncated}, args...)...)
		if e != nil {
			err = fmt.Errorf("%w (%w)", err, e)
		}
		return count, err
	}
	switch {
	case n <= bytes || (e != nil && C.PZ_TRUNCATED_SIZE == 0):
		return wrap(0, "message from rank %d has more elements than the buffer's %d (the MPI library does not say how many)", src, bytes/sz)
	case e == nil && n >= room:
		return wrap(0, "message from rank %d has at least %d bytes, buffer holds %d %v (%d bytes)", src, n, bytes/sz, dt, bytes)
	case n%sz == 0:
		return wrap(n/sz, "message from rank %d has %d elements, buffer holds %d", src, n/sz, bytes/sz)
	}
	return wrap(0, "message from rank %d has %d bytes, buffer holds %d %v (%d bytes)", src, n, bytes/sz, dt, bytes)
}

// test tests the operation once; r.mu is held. Once r's communicator is
// freed or MPI is being finalized it ends r instead of waiting for ever
// (end.go): a receive is canceled, a send that has not completed is
// left to MPI (orphan); after MPI_Finalize it makes no MPI call.
func (r *request) test() (bool, error) {
	if r.completed() {
		return true, nil
	}
	end := r.ending()
	if end {
		if r.c.st.finalized.Load() {
			r.orphan()
			return true, nil
		}
		if r.recv {
			r.askEnd()
		}
	}
	_ = r.cancelIfAsked() // a failure is complete's to report
	r.cflag = 0
	r.c.st.lock()
	rc := C.pz_test_u(r.reqU(), C.uintptr_t(uintptr(unsafe.Pointer(&r.cflag))), C.uintptr_t(uintptr(unsafe.Pointer(&r.cst))))
	r.c.st.unlock()
	runtime.KeepAlive(r) // C had only the addresses of its fields
	if r.cflag == 0 && rc == 0 {
		if end && !r.recv {
			r.orphan()
			return true, nil
		}
		return false, nil
	}
	r.complete(rc, &r.cst)
	return true, nil
}

// Wait blocks until the operation completes or ctx is done. With a ctx that
// cannot be canceled it calls MPI_Wait; otherwise it polls MPI_Test. After a
// ctx error the operation is still pending and Wait may be called again.
// The stall watch sees the wait either way.
func (r *request) Wait(ctx context.Context) (comm.Status, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.completed() {
		id := r.c.beginP2P(ctx, r.what)
		if r.c.blocks(ctx) && !r.ending() {
			if r.recv {
				r.enterWait()
			}
			rc := C.pz_wait_u(r.reqU(), C.uintptr_t(uintptr(unsafe.Pointer(&r.cst))))
			if r.recv {
				r.leaveWait()
			}
			r.complete(rc, &r.cst) // r is alive: C had the address of its field
			r.c.st.paceP2P()
		} else if err := poll(ctx, spinFor(r.bytes), r.test); err != nil {
			r.c.st.watch.endP2P(id)
			return comm.Status{}, r.errf(fmt.Errorf("Wait: %w", err))
		}
		r.c.st.watch.endP2P(id)
	}
	return r.st, r.err
}

// WatchWait implements comm.WaitWatcher: the stall watch sees a wait of
// WaitAny or WaitSome on r as it sees r's own Wait.
func (r *request) WatchWait(ctx context.Context) (stop func()) {
	if r.completed() {
		return func() {}
	}
	id := r.c.beginP2P(ctx, r.what)
	return func() { r.c.st.watch.endP2P(id) }
}

// reqU is the address of r's MPI_Request (C memory) as an integer.
func (r *request) reqU() C.uintptr_t { return C.uintptr_t(uintptr(unsafe.Pointer(r.req))) }

// completed reports whether the operation is known to have completed.
func (r *request) completed() bool { return r.fin.Load() }

// closeDone closes the Done channel, once, if it was made. complete sets
// fin before calling it and Done makes the channel before loading fin, so
// one of them sees the other and closes it.
func (r *request) closeDone() {
	if ch := r.doneCh.Load(); ch != nil && r.closed.CompareAndSwap(false, true) {
		close(*ch)
	}
}

// Done implements comm.Notifier: the first call makes the channel (most
// requests are only waited on, and go without one) and hands the request
// to the process's progress engine, which tests it until it completes.
func (r *request) Done() <-chan struct{} {
	ch := r.doneCh.Load()
	if ch == nil {
		c := make(chan struct{})
		if r.doneCh.CompareAndSwap(nil, &c) {
			ch = &c
		} else {
			ch = r.doneCh.Load()
		}
	}
	if r.completed() {
		r.closeDone()
	} else if !r.watched.Swap(true) {
		r.c.st.progress.watch(r)
	}
	return *ch
}

// Test reports whether the operation has completed, without blocking. It
// reports false while another goroutine is in Wait.
func (r *request) Test() (bool, comm.Status, error) {
	if r.completed() {
		return true, r.st, r.err
	}
	if !r.mu.TryLock() {
		return false, comm.Status{}, nil
	}
	defer r.mu.Unlock()
	done, _ := r.test()
	if !done {
		return false, comm.Status{}, nil
	}
	return true, r.st, r.err
}

var _ comm.Canceler = (*request)(nil)

// Cancel implements comm.Canceler for a receive (Irecv, a round of
// RecvInit): MPI_Cancel, then MPI_Test_cancelled, when the request
// completes, tells a canceled receive (comm.ErrCanceled) from one that
// had matched its message. MPI_Cancel is called here when no other
// goroutine holds the request, or when one is blocked in MPI_Wait on it,
// which MPI_Cancel ends (MPI allows it from another thread under
// MPI_THREAD_MULTIPLE, the only level at which Wait blocks in MPI);
// otherwise the goroutine that tests the request (a polling Wait, Test,
// the progress engine) calls it before its next test. A send cannot be
// canceled: MPI deprecates it, and Open MPI may never complete a send
// request it was asked to cancel.
func (r *request) Cancel() error {
	if !r.recv {
		return r.errf(fmt.Errorf("Cancel: %w: only a receive can be canceled (MPI deprecates canceling sends); wait for it", comm.ErrInvalidArg))
	}
	if r.completed() || r.c.st.finalized.Load() { // Finalize ended every request (end.go)
		return nil
	}
	r.cancelMu.Lock()
	r.cancelAsked.Store(true)
	var err error
	if r.blocked.Load() {
		// The Wait holds mu until MPI_Wait returns, which for a receive
		// no message matches only MPI_Cancel makes it do. The slot stays
		// the request's until that Wait, out of MPI_Wait, has waited for
		// cancelMu (leaveWait): r.req holds this request's MPI_Request,
		// or MPI_REQUEST_NULL once MPI_Wait has completed it.
		err = r.cancelLocked()
	}
	r.cancelMu.Unlock()
	if err == nil && r.mu.TryLock() {
		if !r.completed() {
			err = r.cancelIfAsked()
		}
		r.mu.Unlock()
	}
	return err
}

// enterWait records that a Wait, holding r.mu, enters MPI_Wait on a
// receive. If Cancel was called before, it calls MPI_Cancel now: that
// Cancel may have seen neither blocked nor r.mu free. (blocked and
// cancelAsked are each stored before the other is loaded, here and in
// Cancel, so at least one of the two sees the other's.)
func (r *request) enterWait() {
	r.blocked.Store(true)
	if r.cancelAsked.Load() {
		_ = r.cancelIfAsked() // complete reports a failure
	}
}

// leaveWait records that the Wait is out of MPI_Wait. A Cancel that saw
// it blocked may be in MPI_Cancel still: wait for it before complete
// gives the slot, and r.req with it, to another operation.
func (r *request) leaveWait() {
	r.blocked.Store(false)
	if r.cancelAsked.Load() {
		r.cancelMu.Lock()
		r.cancelMu.Unlock() // empty: it only waits for Cancel to leave MPI_Cancel
	}
}

// cancelIfAsked calls MPI_Cancel on a request Cancel was called on, once;
// r.mu is held and the request has not completed (or a Wait is in
// MPI_Wait on it). It returns MPI_Cancel's error, which complete reports
// too.
func (r *request) cancelIfAsked() error {
	if !r.cancelAsked.Load() {
		return nil
	}
	r.cancelMu.Lock()
	defer r.cancelMu.Unlock()
	return r.cancelLocked()
}

// cancelLocked calls MPI_Cancel unless it was called; r.cancelMu is held.
func (r *request) cancelLocked() error {
	if r.canceled {
		return r.cancelErr
	}
	r.canceled = true
	r.c.st.lock()
	rc := C.pz_cancel_u(r.reqU())
	r.c.st.unlock()
	if rc != 0 {
		r.cancelErr = r.errf(fmt.Errorf("Cancel: %w", r.c.st.error("MPI_Cancel", rc)))
	}
	return r.cancelErr
}

// cancelFailure is the error of a failed MPI_Cancel on r, or nil.
func (r *request) cancelFailure() error {
	if !r.cancelAsked.Load() {
		return nil
	}
	r.cancelMu.Lock()
	defer r.cancelMu.Unlock()
	return r.cancelErr
}

// resetCancel forgets a past round's cancellation (persistent Start);
// r.mu is held.
func (r *request) resetCancel() {
	r.cancelMu.Lock()
	r.cancelAsked.Store(false)
	r.endAsked.Store(false)
	r.blocked.Store(false)
	r.canceled, r.cancelErr = false, nil
	r.cancelMu.Unlock()
}
