//go:build mpi

package mpi

/*
#include "pz_mpi.h"
#include "pz_agree.h"
#include "pz_gate.h"
*/
import "C"

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/comm"
)

// Communicators shared with C and Fortran libraries (ParallelZone's users
// pass an MPI_Comm both ways): Import wraps one a library made, Handle and
// Fortran give one of pz's to a library.

// Import wraps a communicator made outside pz, given as its C handle (an
// MPI_Comm converted to uintptr: `(uintptr_t)comm` in C). It is collective
// over that communicator. pz works on a duplicate (MPI_Comm_dup), so its
// error handler and its messages never touch the library's communicator;
// Free frees the duplicate only. ctx is checked before the call
// (MPI_Comm_dup cannot be interrupted); on an MPI at
// MPI_THREAD_SERIALIZED the ranks first meet in an MPI_Ibarrier on that
// communicator, which ctx bounds, and then agree that every rank is still
// there (an MPI_Iallreduce). There a rank whose ctx ends before every rank
// has called Import returns ctx's error, and the others, once they call
// it, an error wrapping ErrImportAbandoned: no rank makes MPI_Comm_dup.
// The giving-up rank's barrier and vote stay pending in MPI until the
// others call Import (pz completes them); the communicator stays usable,
// and every rank may call Import again.
func (w *World) Import(ctx context.Context, handle uintptr) (*Comm, error) {
	return w.importComm(ctx, "Import", C.pz_comm_of(C.uintptr_t(handle)))
}

// ImportFortran is Import for a Fortran handle (an INTEGER communicator, or
// MPI_Comm_c2f of a C one); MPI_Comm_f2c converts it.
func (w *World) ImportFortran(ctx context.Context, f int) (*Comm, error) {
	return w.importComm(ctx, "ImportFortran", C.pz_comm_f2c(C.int64_t(f)))
}

func (w *World) importComm(ctx context.Context, call string, c C.MPI_Comm) (*Comm, error) {
	if err := w.usable(call); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("mpi: %s: %w", call, err)
	}
	if C.pz_comm_is_null(c) != 0 {
		return nil, fmt.Errorf("mpi: %s: MPI_COMM_NULL: %w", call, comm.ErrInvalidArg)
	}
	if w.st.serialize {
		if err := w.st.gate(ctx, c, call, "MPI_Comm_dup", nil, 0, false, ErrImportAbandoned,
			"the communicator stays usable, and every rank may call "+call+" again"); err != nil {
			return nil, fmt.Errorf("mpi: %s: %w", call, err)
		}
	}
	var nc C.MPI_Comm
	w.st.lock()
	rc := C.pz_comm_dup(c, &nc)
	w.st.unlock()
	if rc != 0 {
		return nil, fmt.Errorf("mpi: %s: %w", call, w.st.error("MPI_Comm_dup", rc))
	}
	d, err := newComm(w.st, nc, false, w.check)
	if err == nil {
		err = d.withEngine()
	}
	if err != nil {
		return nil, fmt.Errorf("mpi: %s: %w", call, err)
	}
	return d, nil
}

// Handle returns c's C handle, for a C library called through cgo: there
// `(MPI_Comm)(uintptr_t)handle` is the communicator. It stays valid until
// c is freed (the world's, until Finalize). The library may communicate
// on it; to keep its messages apart from pz's, it should duplicate it.
func (c *Comm) Handle() uintptr { return uintptr(C.pz_comm_handle(c.c)) }

// Fortran returns c's Fortran handle (MPI_Comm_c2f), for a Fortran
// library or a C one that takes an MPI_Fint.
func (c *Comm) Fortran() int { return int(C.pz_comm_c2f(c.c)) }

// HandleOf returns the C handle of c, which must be a communicator of this
// package (the *World that Init returned, or a *Comm from it, as a
// RuntimeView's Comm is under MPI).
func HandleOf(c comm.Comm) (uintptr, error) {
	m, err := asComm(c)
	if err != nil {
		return 0, err
	}
	return m.Handle(), nil
}

// FortranOf returns the Fortran handle of c, as HandleOf does the C one.
func FortranOf(c comm.Comm) (int, error) {
	m, err := asComm(c)
	if err != nil {
		return 0, err
	}
	return m.Fortran(), nil
}

func asComm(c comm.Comm) (*Comm, error) {
	switch m := c.(type) {
	case *World:
		return m.Comm, nil
	case *Comm:
		return m, nil
	}
	return nil, fmt.Errorf("mpi: %T is not an MPI communicator of this package: %w", c, comm.ErrInvalidArg)
}

// gate runs before a blocking MPI call that has no polled form and that
// every rank of c must make (MPI_Comm_dup of a communicator made outside
// pz in Import; MPI_Comm_dup, MPI_Comm_split and MPI_Comm_split_type in
// Comm.syncBefore): that call may start only when every rank will make it.
// Otherwise a rank waiting in it waits for good, and on an MPI at
// MPI_THREAD_SERIALIZED holds the lock of every MPI call meanwhile, so that
// other goroutines' calls, which the others may wait for, cannot start.
// call names the pz call (Import, Dup), mpiCall the blocking MPI call,
// abandoned the error the other ranks' call wraps when this one gives up,
// and after says what becomes of c then.
//
// The ranks meet in a first step on c, tested until it completes or ctx
// ends, then vote with an MPI_Iallreduce (MPI_MIN) whether each is still
// there: 1 from a rank whose first step completed, 0 from one whose ctx
// ended first. Only when every rank voted 1 does any make the call. The
// first step is an MPI_Ibarrier, or with agree (a Comm with the check on)
// the agreement step: agree[0], this rank's element, is allreduced into
// agree[1] with pz_agree_op (an MPI_Iallreduce; the blocking MPI_Allreduce
// with block, a communicator of the blocking form (Comm.collBlocks), as
// every collective's agreement step then, which it may meet on a rank in
// another collective). A rank whose agreement step completed votes only when every
// rank's descriptor was the same (every rank is in this gate, size ranks);
// otherwise gate returns nil at once and the caller reports the mismatch
// from agree[1], as the other ranks, in another collective, run no vote.
// A rank that gave up in the agreement step still votes 0: then its vote
// stays pending, on a communicator it broke. Every rank that entered the
// first step votes at once (the one that gives up, as it gives up), so
// once a rank's first step completed its vote completes soon: it is waited
// for without ctx. A rank whose ctx ended (also before gate) leaves its
// first step and vote to a goroutine that completes them when the others
// call (or stops at Finalize); they still count among c's collectives, in
// the same order on every rank. Without the vote the step that ctx ended
// stayed pending and the other ranks, whose step then completed, went on
// into the blocking call and waited there for good.
func (s *state) gate(ctx context.Context, c C.MPI_Comm, call, mpiCall string, agree *[2]C.pz_agree_t, size int, block bool, abandoned error, after string) error {
	g := C.pz_gate_new()
	if g == nil {
		return fmt.Errorf("allocating %s's barrier: %w", call, ErrMPI)
	}
	first, firstName := "MPI_Ibarrier", "MPI_Ibarrier"
	s.lock()
	var rc C.int
	if agree != nil {
		first, firstName = "MPI_Iallreduce", "agreement step (an MPI_Iallreduce)"
		cblock := C.int(0)
		if block {
			cblock, first = 1, "MPI_Allreduce" // as every collective's agreement step then
		}
		rc = C.pz_gate_agree(c, g, &agree[0], s.agreeType, s.agreeOp, cblock)
	} else {
		rc = C.pz_gate_barrier(c, g)
	}
	s.unlock()
	if rc != 0 {
		C.pz_gate_free(g)
		return s.error(first, rc)
	}
	test := func(which C.int) func() (bool, error) {
		return func() (bool, error) {
			var done C.int
			s.lock()
			rc := C.pz_gate_test(g, which, &done)
			s.unlock()
			if rc != 0 {
				return false, s.error("MPI_Test", rc)
			}
			return done != 0, nil
		}
	}
	if err := poll(ctx, 0, test(0)); err != nil {
		if ctx.Err() == nil {
			return err // MPI's error: the requests are MPI's (g is kept)
		}
		s.lock()
		rc := C.pz_gate_vote(c, g, 0)
		s.unlock()
		if rc != 0 {
			return fmt.Errorf("%w; its %s on the communicator stays pending, and voting to give up failed too (%w): "+
				"the other ranks' %s may wait in %s for good", err, firstName, s.error("MPI_Iallreduce", rc), call, mpiCall)
		}
		go s.finishGate(g)
		return fmt.Errorf("%w; not every rank had called %s: its %s and a vote to give up (an MPI_Iallreduce) "+
			"on the communicator stay pending until they do, and then their %s fails too (no rank makes %s); %s",
			err, call, firstName, call, mpiCall, after)
	}
	if agree != nil {
		C.pz_gate_agreed(g, &agree[1])
		if _, same := agreed(header(&agree[1]), size); !same {
			C.pz_gate_free(g) // its one request completed
			return nil
		}
	}
	s.lock()
	rc = C.pz_gate_vote(c, g, 1)
	s.unlock()
	if rc != 0 {
		return s.error("MPI_Iallreduce", rc) // g is MPI's
	}
	// Every rank entered the barrier, so each votes at once: not bounded
	// by ctx, which a rank whose vote counted must not give up on.
	if err := poll(context.Background(), 0, test(1)); err != nil {
		return err
	}
	here := C.pz_gate_result(g)
	C.pz_gate_free(g)
	if here == 0 {
		return fmt.Errorf("%w: another rank's %s ended (its context) before every rank had called it; "+
			"no rank made %s; %s", abandoned, call, mpiCall, after)
	}
	return nil
}

// stopGates stops the goroutines completing abandoned gates (finishGate)
// before MPI_Finalize: a test in progress ends first, and none follows.
// finishGate's own check of finalized did not do: it could pass just
// before Finalize set it, and its MPI_Test then ran during MPI_Finalize,
// which takes no lock of pz's (or after it, which Open MPI aborts on).
func (s *state) stopGates() {
	s.gateMu.Lock()
	s.gatesEnd = true
	s.gateMu.Unlock()
}

// finishGate completes the barrier and the vote of a gate that ctx ended,
// then frees it; it stops at Finalize (stopGates), leaving them to MPI.
func (s *state) finishGate(g *C.pz_gate) {
	for which := C.int(0); which < 2; which++ {
		err := poll(context.Background(), 0, func() (bool, error) {
			var done C.int
			s.gateMu.Lock()
			defer s.gateMu.Unlock()
			if s.gatesEnd || s.finalized.Load() {
				return false, ErrFinalized
			}
			s.lock()
			defer s.unlock()
			if rc := C.pz_gate_test(g, which, &done); rc != 0 {
				return false, s.error("MPI_Test", rc)
			}
			return done != 0, nil
		})
		if err != nil {
			return
		}
	}
	C.pz_gate_free(g)
}
