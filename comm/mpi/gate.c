//go:build mpi

/* The gate before a blocking-only MPI call (handle.go: Import's
 * MPI_Comm_dup, Comm's MPI_Comm_dup, MPI_Comm_split, MPI_Comm_split_type):
 * the ranks meet in an MPI_Ibarrier, or with the check on in the
 * agreement step (an MPI_Iallreduce of a pz_agree_t), then vote with an
 * MPI_Iallreduce (MPI_MIN) whether every rank is still there, before any
 * makes the call. The requests and their buffers live in C memory: a rank
 * whose context ended leaves them to a goroutine that completes them
 * later. */
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "pz_gate.h"

pz_gate *pz_gate_new(void) {
	pz_gate *g = calloc(1, sizeof *g);
	if (g) g->bar = g->vote = MPI_REQUEST_NULL;
	return g;
}

void pz_gate_free(pz_gate *g) { free(g); }

int pz_gate_barrier(MPI_Comm c, pz_gate *g) { return MPI_Ibarrier(c, &g->bar); }

/* pz_gate_agree runs the agreement step as the first step: in is copied
 * into the gate, the reduced element comes to g->aout (pz_gate_agreed).
 * With block it makes the blocking MPI_Allreduce, as the other
 * collectives' agreement step does where the context cannot end (g->bar
 * then stays MPI_REQUEST_NULL, which tests as done); otherwise it starts
 * MPI_Iallreduce. */
int pz_gate_agree(MPI_Comm c, pz_gate *g, const pz_agree_t *in, MPI_Datatype t, MPI_Op op, int block) {
	memcpy(&g->ain, in, sizeof g->ain);
	if (block) return MPI_Allreduce(&g->ain, &g->aout, 1, t, op, c);
	return MPI_Iallreduce(&g->ain, &g->aout, 1, t, op, c, &g->bar);
}

void pz_gate_agreed(const pz_gate *g, pz_agree_t *out) { memcpy(out, &g->aout, sizeof *out); }

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
