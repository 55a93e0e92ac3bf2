//go:build mpi

/* Import's gate on an MPI at MPI_THREAD_SERIALIZED (handle.go): the ranks
 * meet in an MPI_Ibarrier on the program's communicator, then vote with an
 * MPI_Iallreduce (MPI_MIN) whether every rank is still there, before any
 * makes MPI_Comm_dup, which blocks under the lock of MPI calls. The
 * requests and the vote's buffers live in C memory: a rank whose context
 * ended leaves them to a goroutine that completes them later. */
#include <stdlib.h>
#include <mpi.h>
#include "pz_gate.h"

pz_gate *pz_gate_new(void) {
	pz_gate *g = calloc(1, sizeof *g);
	if (g) g->bar = g->vote = MPI_REQUEST_NULL;
	return g;
}

void pz_gate_free(pz_gate *g) { free(g); }

int pz_gate_barrier(MPI_Comm c, pz_gate *g) { return MPI_Ibarrier(c, &g->bar); }

int pz_gate_vote(MPI_Comm c, pz_gate *g, int here) {
	g->in = here;
	return MPI_Iallreduce(&g->in, &g->out, 1, MPI_INT, MPI_MIN, c, &g->vote);
}

/* pz_gate_test tests the barrier (which == 0) or the vote (1); *done is
 * set once it completed (a completed request is MPI_REQUEST_NULL, which
 * tests as done). */
int pz_gate_test(pz_gate *g, int which, int *done) {
	return MPI_Test(which ? &g->vote : &g->bar, done, MPI_STATUS_IGNORE);
}

int pz_gate_result(pz_gate *g) { return g->out; }
