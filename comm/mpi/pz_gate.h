/* Import's gate (gate.c). */
#ifndef PZ_GATE_H
#define PZ_GATE_H
#include <mpi.h>

typedef struct {
	MPI_Request bar, vote;
	int in, out;
} pz_gate;

pz_gate *pz_gate_new(void);
void pz_gate_free(pz_gate *g);
int pz_gate_barrier(MPI_Comm c, pz_gate *g);
int pz_gate_vote(MPI_Comm c, pz_gate *g, int here);
int pz_gate_test(pz_gate *g, int which, int *done);
int pz_gate_result(pz_gate *g);
#endif
