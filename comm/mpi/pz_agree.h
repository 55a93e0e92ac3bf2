/*
 * pz_agree.h - the element of the agreement step (agree.go, agree.c).
 *
 * Before each collective the ranks allreduce one pz_agree_t with
 * pz_agree_op: the header words combine with max, as MPI_MAX would (see
 * agreeVector), and a small AllReduce, Reduce or Bcast rides along in the
 * payload, combined only where both operands describe the same operation
 * (pay equal and not zero): a reduction folds the payloads, a Bcast keeps
 * the root's. Every agreement step sends this one element, whatever the
 * collective, so ranks that disagree still make matching MPI calls.
 */
#ifndef PZ_AGREE_H
#define PZ_AGREE_H

#include <mpi.h>
#include <stdint.h>

enum { PZ_AGREE_PAYLOAD = 64, PZ_AGREE_BCAST = 0xff /* the type code of a Bcast's bytes */ };

typedef struct {
	int64_t h[4];   /* hash, -hash, failure code, volume: max */
	int64_t pay;    /* type<<24 | op<<16 | bytes of the payload, or 0 */
	int64_t root;   /* a Bcast: 1 where the payload holds root's bytes */
	unsigned char payload[PZ_AGREE_PAYLOAD];
} pz_agree_t;

int pz_agree_init(MPI_Datatype *type, MPI_Op *op);
/* pz_agree_free frees what pz_agree_init made, before MPI_Finalize. */
void pz_agree_free(MPI_Datatype *type, MPI_Op *op);
void pz_agree_combine(pz_agree_t *in, pz_agree_t *inout);
int pz_agree_step(uintptr_t agree, uintptr_t send, int send_n, uintptr_t recv, int recv_n,
                  uintptr_t slot, uint64_t seq, uintptr_t t, uintptr_t op, uintptr_t c);

#endif
