//go:build mpi

package mpiclib

/*
#include <mpi.h>
#include <stdint.h>

static int lib_split(int colors, uintptr_t *out, int *rank, int *size) {
	int me, e;
	MPI_Comm c;
	if ((e = MPI_Comm_rank(MPI_COMM_WORLD, &me)) != MPI_SUCCESS) return e;
	if ((e = MPI_Comm_split(MPI_COMM_WORLD, me % colors, -me, &c)) != MPI_SUCCESS) return e;
	MPI_Comm_rank(c, rank);
	MPI_Comm_size(c, size);
	*out = (uintptr_t)c;
	return MPI_SUCCESS;
}
static int lib_sum(uintptr_t h, long v, long *out) {
	return MPI_Allreduce(&v, out, 1, MPI_LONG, MPI_SUM, (MPI_Comm)h);
}
static int lib_sum_fortran(int64_t f, long v, long *out) {
	return MPI_Allreduce(&v, out, 1, MPI_LONG, MPI_SUM, MPI_Comm_f2c((MPI_Fint)f));
}
static int64_t lib_fortran(uintptr_t h) { return (int64_t)MPI_Comm_c2f((MPI_Comm)h); }
static int lib_free(uintptr_t h) { MPI_Comm c = (MPI_Comm)h; return MPI_Comm_free(&c); }
static uintptr_t lib_null(void) { return (uintptr_t)MPI_COMM_NULL; }
*/
import "C"

import "fmt"

// Split splits MPI_COMM_WORLD by world rank modulo colors, in reverse rank
// order (so that ranks differ from the world's), and returns the new
// communicator's C handle and this process's rank and size in it.
func Split(colors int) (handle uintptr, rank, size int, err error) {
	var h C.uintptr_t
	var r, s C.int
	if rc := C.lib_split(C.int(colors), &h, &r, &s); rc != 0 {
		return 0, 0, 0, fmt.Errorf("mpiclib: MPI_Comm_split failed: code %d", rc)
	}
	return uintptr(h), int(r), int(s), nil
}

// Sum returns the sum of v over the communicator with C handle h
// (MPI_Allreduce in C).
func Sum(h uintptr, v int) (int, error) {
	var out C.long
	if rc := C.lib_sum(C.uintptr_t(h), C.long(v), &out); rc != 0 {
		return 0, fmt.Errorf("mpiclib: MPI_Allreduce failed: code %d", rc)
	}
	return int(out), nil
}

// SumFortran is Sum on a Fortran handle.
func SumFortran(f int, v int) (int, error) {
	var out C.long
	if rc := C.lib_sum_fortran(C.int64_t(f), C.long(v), &out); rc != 0 {
		return 0, fmt.Errorf("mpiclib: MPI_Allreduce failed: code %d", rc)
	}
	return int(out), nil
}

// Fortran returns the Fortran handle of C handle h (MPI_Comm_c2f).
func Fortran(h uintptr) int { return int(C.lib_fortran(C.uintptr_t(h))) }

// Free frees the communicator with C handle h (collective).
func Free(h uintptr) error {
	if rc := C.lib_free(C.uintptr_t(h)); rc != 0 {
		return fmt.Errorf("mpiclib: MPI_Comm_free failed: code %d", rc)
	}
	return nil
}

// Null returns MPI_COMM_NULL's C handle.
func Null() uintptr { return uintptr(C.lib_null()) }
