//go:build mpi

package mpi

/*
#include "pz_mpi.h"

static int pz_world_errors_fatal(void) {
	MPI_Errhandler eh;
	int fatal;
	if (MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh) != MPI_SUCCESS) return 0;
	fatal = eh == MPI_ERRORS_ARE_FATAL;
	MPI_Errhandler_free(&eh);
	return fatal;
}
*/
import "C"

import (
	"fmt"
	"os"
)

// embedded plays the program that embeds pz: it initializes MPI itself,
// at a thread level of its choice, before Init adopts it, and finalizes
// it after the World's Finalize has left it running. It is what the
// tests use to run the package on an adopted MPI at
// MPI_THREAD_SERIALIZED (export_test.go: InitEmbedded), a path no
// MPI_Init_thread of pz's own takes; nothing outside the tests calls it.
type embedded struct {
	thread *mpiThread // MPI_Init_thread's thread, where MPI_Finalize runs
}

// initEmbedded calls MPI_Init_thread(level) on a thread of its own, as
// a C main would, and returns the level MPI provides. It excludes Open
// MPI's op/avx component as Init does (it saturates 8- and 16-bit sums).
func initEmbedded(level int) (*embedded, int, error) {
	if _, set := os.LookupEnv("OMPI_MCA_op"); !set {
		if err := os.Setenv("OMPI_MCA_op", "^avx"); err != nil {
			return nil, 0, fmt.Errorf("mpi: embedding MPI: %w", err)
		}
	}
	e := &embedded{thread: startMPIThread()}
	var rc, provided C.int
	e.thread.do(func() { rc = C.pz_init(C.int(level), &provided) })
	if rc != 0 {
		e.thread.stop()
		return nil, 0, fmt.Errorf("mpi: embedding MPI: MPI_Init_thread(%d) failed with code %d", level, int(rc))
	}
	return e, int(provided), nil
}

// finalize calls MPI_Finalize on the thread that initialized MPI.
func (e *embedded) finalize() error {
	var rc C.int
	e.thread.do(func() { rc = C.pz_finalize() })
	e.thread.stop()
	if rc != 0 {
		return fmt.Errorf("mpi: embedding MPI: MPI_Finalize failed with code %d", int(rc))
	}
	return nil
}

// worldErrorsFatal reports whether MPI_COMM_WORLD's error handler is
// MPI_ERRORS_ARE_FATAL, the one MPI_Init gives it, which the embedding
// program expects back after the World's Finalize.
func worldErrorsFatal() bool { return C.pz_world_errors_fatal() != 0 }
