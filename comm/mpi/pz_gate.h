/* The gate before a blocking-only MPI call (gate.c, handle.go). */
#ifndef PZ_GATE_H
#define PZ_GATE_H
#include <mpi.h>
#include "pz_agree.h"

typedef struct {
	MPI_Request bar, vote; /* the first step (barrier or agreement), the vote */
	int in, out;
	pz_agree_t ain, aout; /* the agreement step's elements, when it is the first step */
} pz_gate;

pz_gate *pz_gate_new(void);
void pz_gate_free(pz_gate *g);
int pz_gate_barrier(MPI_Comm c, pz_gate *g);
int pz_gate_agree(MPI_Comm c, pz_gate *g, const pz_agree_t *in, MPI_Datatype t, MPI_Op op, int block);
void pz_gate_agreed(const pz_gate *g, pz_agree_t *out);
int pz_gate_vote(MPI_Comm c, pz_gate *g, int here);
int pz_gate_test(pz_gate *g, int which, int *done);
int pz_gate_result(pz_gate *g);
#endif
