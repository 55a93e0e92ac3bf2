//go:build mpi

package mpi

/*
#include "pz_mpi.h"
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
// communicator, which ctx bounds.
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
		if err := w.st.barrierPolled(ctx, c); err != nil {
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

// barrierPolled is an MPI_Ibarrier on c tested until it completes or ctx
// ends, each test under the lock. Under MPI_THREAD_SERIALIZED the ranks
// meet in it before a blocking collective that has no polled form
// (MPI_Comm_dup of a communicator made outside pz), which then waits only
// for ranks already making it, instead of holding the lock while other
// goroutines' calls, which the ranks not there yet may wait for, cannot
// start. A barrier that ctx ends stays pending in MPI.
func (s *state) barrierPolled(ctx context.Context, c C.MPI_Comm) error {
	var req C.MPI_Request
	s.lock()
	rc := C.pz_ibarrier(c, &req)
	s.unlock()
	if rc != 0 {
		return s.error("MPI_Ibarrier", rc)
	}
	return poll(ctx, 0, func() (bool, error) {
		var flag C.int
		var st C.pz_status
		s.lock()
		rc := C.pz_test(&req, &flag, &st)
		s.unlock()
		if rc != 0 {
			return false, s.error("MPI_Test", rc)
		}
		return flag != 0, nil
	})
}
