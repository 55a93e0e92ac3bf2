//go:build mpi

package mpi

/*
#include "pz_mpi.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"time"

	"github.com/pzgo/pz/comm"
)

// Ending the pending point-to-point operations of a communicator being
// freed (Comm.Free), or of every communicator when MPI is finalized
// (World.Finalize). A receive that no message will match, or a send
// whose receiver is gone, would otherwise leave its Wait waiting for
// ever, and a Wait or Test after MPI_Finalize would call MPI (which
// aborts the process). Free and Finalize first mark the communicator freed
// (Comm.freed) or MPI ending (state.ending); from then on every test of
// such a request ends it (request.test, the progress engine's testAll):
//
//   - a receive is canceled (MPI_Cancel, as Cancel does) and completes
//     with an error wrapping comm.ErrFreed, nothing received, unless it
//     had matched its message, when it completes as usual;
//   - a send that has not completed, which MPI cannot cancel (Open MPI's
//     ob1 never completes a send asked to), is handed to MPI with
//     MPI_Request_free (orphan): it may still be delivered, its request
//     completes at once with an error wrapping comm.ErrFreed, and its
//     buffer and slot stay pinned for the life of the process, since
//     MPI may read them until it is done.
//
// Then Free and Finalize test every pending request of theirs themselves
// (endPending), so that each has completed when they return, except a
// send that another goroutine waits for inside MPI_Wait (a Wait whose ctx
// cannot be canceled): Free leaves it to MPI, Finalize waits for it up to
// endWait and otherwise leaves MPI unfinalized (ErrUnfinalized), as it
// does for a collective still inside MPI. The internal requests of
// collectives (coll) are not ended: Free excludes collectives, and
// Finalize waits for the engines of non-blocking collectives first.

// endWait bounds how long Free and Finalize wait for a canceled receive
// that had matched its message before (its data still arriving) to
// complete, after which it too is handed to MPI (orphan), and how long
// Finalize waits for a send that another goroutine waits for inside
// MPI_Wait.
const endWait = 2 * time.Second

// ending reports whether r is to be ended: a point-to-point request whose
// communicator was freed, or any once MPI is being finalized.
func (r *request) ending() bool {
	return !r.coll && (r.c.freed.Load() || r.c.st.ending.Load())
}

// askEnd asks for the cancellation of a receive that is ended; r.mu is
// held, so no Wait is inside MPI_Wait on it (cancelIfAsked calls
// MPI_Cancel).
func (r *request) askEnd() {
	r.endAsked.Store(true)
	r.cancelAsked.Store(true)
}

// endErr is the error of r ended by Free or Finalize: canceled (a
// receive that no message had matched) or orphaned (handed to MPI
// unfinished).
func (r *request) endErr(orphaned bool) error {
	why := fmt.Errorf("%w", comm.ErrFreed)
	if r.c.st.ending.Load() {
		why = fmt.Errorf("MPI was finalized (%w)", comm.ErrFreed)
	}
	switch {
	case !orphaned:
		return r.errf(fmt.Errorf("%w before a message matched the receive; nothing was received", why))
	case r.recv:
		return r.errf(fmt.Errorf("%w before the receive, which had matched a message, completed; MPI may still write its buffer, which stays pinned", why))
	}
	return r.errf(fmt.Errorf("%w before the send completed; MPI cannot cancel a send: the message may still be delivered, and its buffer stays pinned", why))
}

// orphan completes r, still pending in MPI, with endErr: MPI_Request_free
// hands the operation to MPI (unless MPI is finalized), which completes
// it in the background; its memory (the slot with its pins and C memory,
// or a persistent request's buffer) is never released, since MPI may use
// it until then. r.mu is held.
func (r *request) orphan() {
	if !r.c.st.finalized.Load() && r.req != nil && *r.req != r.c.h.request_null {
		r.c.st.lock()
		C.pz_request_free(r.req)
		r.c.st.unlock()
	}
	if r.round {
		r.owner.orphaned.Store(true)
	} else if r.slot != nil {
		r.c.st.slots.retire(r.slot)
		r.slot, r.req = nil, nil
	}
	r.into, r.stage = nil, nil
	r.st, r.err = comm.Status{}, r.endErr(true)
	r.fin.Store(true)
	r.closeDone()
}

// end ends r once its communicator is marked freed or MPI ending: it tests
// r (request.test ends it) until r has completed, and hands a receive to
// MPI past deadline (orphan). It reports false for a send that another
// goroutine holds past deadline, or at once without waitHeld: a Wait
// inside MPI_Wait, which nothing can end but MPI. (Another holder, a
// polling Wait, Test, the progress engine, ends r itself at its next
// test.)
func (r *request) end(deadline time.Time, waitHeld bool) bool {
	if r.recv {
		// A Wait inside MPI_Wait on it holds r.mu: MPI_Cancel ends it
		// (Cancel), and complete reports comm.ErrFreed.
		r.endAsked.Store(true)
	}
	for i := 0; !r.completed(); i++ {
		if r.mu.TryLock() {
			done := r.completed() || (r.round && !r.owner.started)
			if !done {
				done, _ = r.test()
			}
			if !done && time.Now().After(deadline) {
				r.orphan()
				done = true
			}
			r.mu.Unlock()
			if done {
				return true
			}
		} else {
			if r.recv && i == 0 {
				_ = r.Cancel() // a failure is complete's to report
			}
			if !r.recv && !waitHeld || time.Now().After(deadline) {
				return r.completed()
			}
		}
		if i < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(50 * time.Microsecond)
		}
	}
	return true
}

// endPending ends the pending point-to-point requests of c, or of every
// communicator when c is nil (Finalize), once c.freed or s.ending is set
// (see end). It returns the requests it could not end.
func (s *state) endPending(c *Comm, deadline time.Time, waitHeld bool) []*request {
	var held []*request
	for _, r := range s.pendingOf(c) {
		if !r.end(deadline, waitHeld) {
			held = append(held, r)
		}
	}
	return held
}

// pendingOf lists the requests of c's point-to-point operations that may
// be pending (every communicator's when c is nil): the one-shot ones in
// slots in use, and every persistent request's round.
func (s *state) pendingOf(c *Comm) []*request {
	var out []*request
	s.slots.mu.Lock()
	for _, sl := range s.slots.all {
		if r := sl.r; r != nil && !r.coll && (c == nil || r.c == c) {
			out = append(out, r)
		}
	}
	s.slots.mu.Unlock()
	s.pmu.Lock()
	for p := range s.persist {
		if c == nil || p.c == c {
			out = append(out, &p.r)
		}
	}
	s.pmu.Unlock()
	return out
}

// stillWaiting describes the requests Finalize could not end: sends that
// goroutines wait for inside MPI_Wait.
func stillWaiting(held []*request) error {
	if len(held) == 0 {
		return nil
	}
	msgs := make([]error, len(held))
	for i, r := range held {
		msgs[i] = fmt.Errorf("%v is inside MPI_Wait on rank %d", r.what, r.c.rank)
	}
	return stillRunning(msgs)
}
