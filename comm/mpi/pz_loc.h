/*
 * pz_loc.h - MinLoc and MaxLoc ops on pz's pairs (loc.c, loc.go).
 */
#ifndef PZ_LOC_H
#define PZ_LOC_H

#include <mpi.h>
#include <stdint.h>

enum { PZ_LOC_NTYPES = 10 }; /* comm.Int8 .. comm.Float64 */

/* pz_loc_init makes the pair type (two int64 words) and, for each value
 * type, the MinLoc and MaxLoc ops; MPI must be initialized. They live
 * until MPI_Finalize. */
int pz_loc_init(MPI_Datatype *pair, MPI_Op ops[PZ_LOC_NTYPES][2]);
/* pz_loc_free frees what pz_loc_init made, before MPI_Finalize. */
void pz_loc_free(MPI_Datatype *pair, MPI_Op ops[PZ_LOC_NTYPES][2]);
/* pz_loc_combine is the op of type (comm.Datatype - 1) for tests. */
void pz_loc_combine(int type, int largest, int64_t *in, int64_t *inout, int len);

#endif
