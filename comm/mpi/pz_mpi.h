/*
 * pz_mpi.h - the C side of pz's cgo binding to MPI (build tag mpi).
 *
 * Every Go call crosses into C exactly once: these static wrappers take the
 * handles Go cached at Init (OpenMPI's MPI_COMM_WORLD, MPI_DOUBLE, MPI_SUM
 * are addresses of globals and each C.MPI_X use from Go would be a hidden
 * cgo call) and translate pz's "in place" flag into MPI_IN_PLACE, which Go
 * must never hold in a pointer variable (it is (void *)1).
 */
#ifndef PZ_MPI_H
#define PZ_MPI_H

#include <mpi.h>
#include <stdint.h>
#include <string.h>

#include "pz_slot.h"

enum { PZ_NTYPES = 13, PZ_NOPS = 11 };

typedef struct {
	MPI_Comm world, null;
	MPI_Datatype types[PZ_NTYPES]; /* indexed by comm.Datatype */
	MPI_Op ops[PZ_NOPS];           /* indexed by comm.Op */
	MPI_Datatype i64, byte;
	MPI_Op max;
	MPI_Errhandler errors_return;
	MPI_Request request_null;
	MPI_Message message_null;
	int err_truncate, thread_multiple, thread_serialized, undefined;
} pz_handles;

static void pz_handles_get(pz_handles *h) {
	memset(h, 0, sizeof *h);
	h->world = MPI_COMM_WORLD;
	h->null = MPI_COMM_NULL;
	h->types[0] = MPI_DATATYPE_NULL;
	h->types[1] = MPI_INT8_T;
	h->types[2] = MPI_INT16_T;
	h->types[3] = MPI_INT32_T;
	h->types[4] = MPI_INT64_T;
	h->types[5] = MPI_UINT8_T;
	h->types[6] = MPI_UINT16_T;
	h->types[7] = MPI_UINT32_T;
	h->types[8] = MPI_UINT64_T;
	h->types[9] = MPI_FLOAT;
	h->types[10] = MPI_DOUBLE;
	h->types[11] = MPI_C_FLOAT_COMPLEX;
	h->types[12] = MPI_C_DOUBLE_COMPLEX;
	h->ops[0] = MPI_OP_NULL;
	h->ops[1] = MPI_SUM;
	h->ops[2] = MPI_PROD;
	h->ops[3] = MPI_MIN;
	h->ops[4] = MPI_MAX;
	h->ops[5] = MPI_LAND;
	h->ops[6] = MPI_LOR;
	h->ops[7] = MPI_BAND;
	h->ops[8] = MPI_BOR;
	h->ops[9] = MPI_BXOR;
	h->ops[10] = MPI_LXOR;
	h->i64 = MPI_INT64_T;
	h->byte = MPI_BYTE;
	h->max = MPI_MAX;
	h->errors_return = MPI_ERRORS_RETURN;
	h->request_null = MPI_REQUEST_NULL;
	h->message_null = MPI_MESSAGE_NULL;
	h->err_truncate = MPI_ERR_TRUNCATE;
	h->thread_multiple = MPI_THREAD_MULTIPLE;
	h->thread_serialized = MPI_THREAD_SERIALIZED;
	h->undefined = MPI_UNDEFINED;
}

/* pz_minmax_ok reports whether MPI_MIN and MPI_MAX order the unsigned
 * type t (of size bytes) as unsigned: MPICH 4.0.2 (Debian 12) compares
 * every unsigned type as signed (the minimum of 0 and 254 is 254). Local:
 * MPI_Reduce_local runs the library's own op. */
#define PZ_MINMAX_CASE(ty) { \
	ty hi = (ty)1 << (8 * sizeof(ty) - 1), b = 0; \
	if (MPI_Reduce_local(&hi, &b, 1, t, MPI_MIN) != MPI_SUCCESS || b != 0) return 0; \
	b = 0; \
	if (MPI_Reduce_local(&hi, &b, 1, t, MPI_MAX) != MPI_SUCCESS || b != hi) return 0; \
	return 1; }
static int pz_minmax_ok(MPI_Datatype t, int size) {
	switch (size) {
	case 1: PZ_MINMAX_CASE(uint8_t)
	case 2: PZ_MINMAX_CASE(uint16_t)
	case 4: PZ_MINMAX_CASE(uint32_t)
	case 8: PZ_MINMAX_CASE(uint64_t)
	}
	return 1;
}

/* pz_state reports MPI_Initialized and MPI_Finalized (both callable at any
 * time, from any thread). */
static void pz_state(int *initialized, int *finalized) {
	MPI_Initialized(initialized);
	MPI_Finalized(finalized);
}

static int pz_init(int required, int *provided) {
	return MPI_Init_thread(NULL, NULL, required, provided);
}

static int pz_query_thread(int *provided) { return MPI_Query_thread(provided); }

static int pz_finalize(void) { return MPI_Finalize(); }

/* pz_error_string writes the message of code into buf (len >= 
 * MPI_MAX_ERROR_STRING) and returns its error class. */
static int pz_error_string(int code, char *buf, int *len, int *class) {
	*len = 0;
	*class = MPI_ERR_OTHER;
	MPI_Error_class(code, class);
	return MPI_Error_string(code, buf, len);
}

static int pz_max_error_string(void) { return MPI_MAX_ERROR_STRING; }

/* pz_tag_ub reads the largest tag the library takes (the MPI_TAG_UB
 * attribute of c, MPI_COMM_WORLD): Open MPI 2^31-1, MPICH 4 2^28-1; MPI
 * promises at least 32767, the value taken if the attribute is missing. */
static int pz_tag_ub(MPI_Comm c, int *ub) {
	void *v = NULL;
	int flag = 0;
	int e = MPI_Comm_get_attr(c, MPI_TAG_UB, &v, &flag);
	if (e != MPI_SUCCESS) return e;
	*ub = flag && v != NULL ? *(int *)v : 32767;
	return MPI_SUCCESS;
}

static int pz_comm_setup(MPI_Comm c, MPI_Errhandler eh, int *rank, int *size) {
	int e = MPI_Comm_set_errhandler(c, eh);
	if (e != MPI_SUCCESS) return e;
	e = MPI_Comm_rank(c, rank);
	if (e != MPI_SUCCESS) return e;
	return MPI_Comm_size(c, size);
}

/* pz_node_masks finds the ranks of c sharing this node's memory
 * (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED), returns their number in
 * size, and gathers their affinity masks (words uint64 each; mine is this
 * rank's) into all, which holds words per rank of c. */
static int pz_node_masks(MPI_Comm c, const uint64_t *mine, int words, uint64_t *all, int *size) {
	MPI_Comm node;
	int e = MPI_Comm_split_type(c, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
	if (e != MPI_SUCCESS) return e;
	e = MPI_Comm_size(node, size);
	if (e == MPI_SUCCESS)
		e = MPI_Allgather(mine, words, MPI_UINT64_T, all, words, MPI_UINT64_T, node);
	MPI_Comm_free(&node);
	return e;
}

static const void *pz_in(const void *s, int inplace) { return inplace ? MPI_IN_PLACE : s; }

static int pz_barrier(MPI_Comm c) { return MPI_Barrier(c); }
static int pz_ibarrier(MPI_Comm c, MPI_Request *r) { return MPI_Ibarrier(c, r); }
/* pz_barrier_step is Barrier's blocking call as pz_allreduce_step is
 * AllReduce's. */
static int pz_barrier_step(uintptr_t c, uintptr_t slot, uint64_t seq) {
	pz_slot_set(slot, seq);
	int rc = MPI_Barrier((MPI_Comm)c);
	pz_slot_clear(slot);
	return rc;
}

static int pz_bcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c) {
	return MPI_Bcast(b, n, t, root, c);
}
/* pz_bcast_step is Bcast's blocking call as pz_allreduce_step is
 * AllReduce's: integer arguments, the watch's slot set around it. */
static int pz_bcast_step(uintptr_t b, int n, uintptr_t t, int root, uintptr_t c, uintptr_t slot, uint64_t seq) {
	pz_slot_set(slot, seq);
	int rc = MPI_Bcast((void *)b, n, (MPI_Datatype)t, root, (MPI_Comm)c);
	pz_slot_clear(slot);
	return rc;
}
static int pz_ibcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request *r) {
	return MPI_Ibcast(b, n, t, root, c, r);
}

static int pz_allreduce(const void *s, void *d, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, int inplace) {
	return MPI_Allreduce(pz_in(s, inplace), d, n, t, op, c);
}
static int pz_iallreduce(const void *s, void *d, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, int inplace, MPI_Request *r) {
	return MPI_Iallreduce(pz_in(s, inplace), d, n, t, op, c, r);
}
/* Prefix reductions and the reduce-scatter (coll.go). */
static int pz_scan(const void *s, void *d, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, int inplace, int exclusive) {
	if (exclusive) return MPI_Exscan(pz_in(s, inplace), d, n, t, op, c);
	return MPI_Scan(pz_in(s, inplace), d, n, t, op, c);
}
static int pz_iscan(const void *s, void *d, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, int inplace, int exclusive, MPI_Request *r) {
	if (exclusive) return MPI_Iexscan(pz_in(s, inplace), d, n, t, op, c, r);
	return MPI_Iscan(pz_in(s, inplace), d, n, t, op, c, r);
}
static int pz_reduce_scatter_block(const void *s, void *d, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
	return MPI_Reduce_scatter_block(s, d, n, t, op, c);
}
static int pz_ireduce_scatter_block(const void *s, void *d, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request *r) {
	return MPI_Ireduce_scatter_block(s, d, n, t, op, c, r);
}

/* Allreduce of memory that Go keeps alive and pinned where MPI keeps it
 * past the call (a Comm's agree buffers; the caller's buffers, kept alive
 * until the blocking call returns): addresses as integers, so that cgo does
 * not check the pointers on every collective (about 40 ns of the ~130 ns a
 * small call costs pz over MPI's own). */
static int pz_allreduce_at(uintptr_t s, uintptr_t d, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, int inplace) {
	return MPI_Allreduce(pz_in((const void *)s, inplace), (void *)d, n, t, op, c);
}
/* pz_allreduce_step is AllReduce's blocking call in one cgo call whose
 * arguments are all integers (cgo checks no pointer): it marks collective
 * seq in progress in the stall watch's slot (pz_slot.h), calls
 * MPI_Allreduce and clears the slot. */
static int pz_allreduce_step(uintptr_t s, uintptr_t d, int n, uintptr_t t, uintptr_t op, uintptr_t c, int inplace,
                             uintptr_t slot, uint64_t seq) {
	pz_slot_set(slot, seq);
	int rc = MPI_Allreduce(pz_in((const void *)s, inplace), (void *)d, n, (MPI_Datatype)t, (MPI_Op)op, (MPI_Comm)c);
	pz_slot_clear(slot);
	return rc;
}
static int pz_iallreduce_at(uintptr_t s, uintptr_t d, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request *r) {
	return MPI_Iallreduce((const void *)s, (void *)d, n, t, op, c, r);
}

/* MPICH before 4.2 crashes in MPI_Reduce with MPI_IN_PLACE on a root other
 * than 0 past 2 KiB (pmodels/mpich#6540, fixed by #6543); its MPI_Ireduce
 * is right. Only root knows it reduces in place, so there every rank takes
 * MPI_Ireduce and MPI_Wait for a root other than 0, as the polled path
 * does anyway. */
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION < 40200000
enum { PZ_REDUCE_ROOT_BUG = 1 };
#else
enum { PZ_REDUCE_ROOT_BUG = 0 };
#endif
static int pz_reduce(const void *s, void *d, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c, int inplace) {
	if (PZ_REDUCE_ROOT_BUG && root != 0) {
		MPI_Request r;
		int e = MPI_Ireduce(pz_in(s, inplace), d, n, t, op, root, c, &r);
		return e != MPI_SUCCESS ? e : MPI_Wait(&r, MPI_STATUS_IGNORE);
	}
	return MPI_Reduce(pz_in(s, inplace), d, n, t, op, root, c);
}
/* pz_reduce_step is Reduce's blocking call as pz_allreduce_step is
 * AllReduce's (d is root's result, 0 elsewhere). */
static int pz_reduce_step(uintptr_t s, uintptr_t d, int n, uintptr_t t, uintptr_t op, int root, uintptr_t c, int inplace,
                          uintptr_t slot, uint64_t seq) {
	pz_slot_set(slot, seq);
	int rc = pz_reduce((const void *)s, (void *)d, n, (MPI_Datatype)t, (MPI_Op)op, root, (MPI_Comm)c, inplace);
	pz_slot_clear(slot);
	return rc;
}
static int pz_ireduce(const void *s, void *d, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c, int inplace, MPI_Request *r) {
	return MPI_Ireduce(pz_in(s, inplace), d, n, t, op, root, c, r);
}

static int pz_allgather(const void *s, int sn, void *d, int dn, MPI_Datatype t, MPI_Comm c) {
	return MPI_Allgather(s, sn, t, d, dn, t, c);
}
/* pz_allgather_step is AllGatherBlockBuf's blocking call as
 * pz_allreduce_step is AllReduce's; inplace: this rank's block is already
 * in d (MPI_IN_PLACE). */
static int pz_allgather_step(uintptr_t s, uintptr_t d, int n, uintptr_t t, uintptr_t c, int inplace,
                             uintptr_t slot, uint64_t seq) {
	pz_slot_set(slot, seq);
	int rc = MPI_Allgather(pz_in((const void *)s, inplace), n, (MPI_Datatype)t, (void *)d, n, (MPI_Datatype)t, (MPI_Comm)c);
	pz_slot_clear(slot);
	return rc;
}
static int pz_iallgather(const void *s, int sn, void *d, int dn, MPI_Datatype t, MPI_Comm c, MPI_Request *r) {
	return MPI_Iallgather(s, sn, t, d, dn, t, c, r);
}
static int pz_allgatherv(const void *s, int sn, void *d, const int *counts, const int *displs, MPI_Datatype t, MPI_Comm c) {
	return MPI_Allgatherv(s, sn, t, d, counts, displs, t, c);
}
static int pz_iallgatherv(const void *s, int sn, void *d, const int *counts, const int *displs, MPI_Datatype t, MPI_Comm c, MPI_Request *r) {
	return MPI_Iallgatherv(s, sn, t, d, counts, displs, t, c, r);
}

static int pz_gather(const void *s, int sn, void *d, int dn, MPI_Datatype t, int root, MPI_Comm c) {
	return MPI_Gather(s, sn, t, d, dn, t, root, c);
}
static int pz_igather(const void *s, int sn, void *d, int dn, MPI_Datatype t, int root, MPI_Comm c, MPI_Request *r) {
	return MPI_Igather(s, sn, t, d, dn, t, root, c, r);
}
static int pz_gatherv(const void *s, int sn, void *d, const int *counts, const int *displs, MPI_Datatype t, int root, MPI_Comm c) {
	return MPI_Gatherv(s, sn, t, d, counts, displs, t, root, c);
}
static int pz_igatherv(const void *s, int sn, void *d, const int *counts, const int *displs, MPI_Datatype t, int root, MPI_Comm c, MPI_Request *r) {
	return MPI_Igatherv(s, sn, t, d, counts, displs, t, root, c, r);
}

static int pz_scatter(const void *s, int sn, void *d, int dn, MPI_Datatype t, int root, MPI_Comm c) {
	return MPI_Scatter(s, sn, t, d, dn, t, root, c);
}
static int pz_iscatter(const void *s, int sn, void *d, int dn, MPI_Datatype t, int root, MPI_Comm c, MPI_Request *r) {
	return MPI_Iscatter(s, sn, t, d, dn, t, root, c, r);
}
static int pz_scatterv(const void *s, const int *counts, const int *displs, void *d, int dn, MPI_Datatype t, int root, MPI_Comm c) {
	return MPI_Scatterv(s, counts, displs, t, d, dn, t, root, c);
}
static int pz_iscatterv(const void *s, const int *counts, const int *displs, void *d, int dn, MPI_Datatype t, int root, MPI_Comm c, MPI_Request *r) {
	return MPI_Iscatterv(s, counts, displs, t, d, dn, t, root, c, r);
}

static int pz_alltoall(const void *s, int sn, void *d, int dn, MPI_Datatype t, MPI_Comm c) {
	return MPI_Alltoall(s, sn, t, d, dn, t, c);
}
static int pz_ialltoall(const void *s, int sn, void *d, int dn, MPI_Datatype t, MPI_Comm c, MPI_Request *r) {
	return MPI_Ialltoall(s, sn, t, d, dn, t, c, r);
}
static int pz_alltoallv(const void *s, const int *sc, const int *sd, void *d, const int *rc, const int *rd, MPI_Datatype t, MPI_Comm c) {
	return MPI_Alltoallv(s, sc, sd, t, d, rc, rd, t, c);
}
static int pz_ialltoallv(const void *s, const int *sc, const int *sd, void *d, const int *rc, const int *rd, MPI_Datatype t, MPI_Comm c, MPI_Request *r) {
	return MPI_Ialltoallv(s, sc, sd, t, d, rc, rd, t, c, r);
}

/* pz's wildcards are -1 (comm.AnySource, comm.AnyTag); MPI's values differ
 * between libraries (Open MPI's MPI_ANY_SOURCE is -1, MPICH's -2, where -1
 * is MPI_PROC_NULL), so every source and tag crosses these. */
static int pz_src(int s) { return s == -1 ? MPI_ANY_SOURCE : s; }
static int pz_tag(int t) { return t == -1 ? MPI_ANY_TAG : t; }

/* Point to point moves bytes (MPI_BYTE): the receiver learns the size in
 * bytes and checks it against its element size. A message past INT_MAX
 * bytes travels as one element of a derived type (pz_type_at). */
static int pz_send(const void *b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c) {
	return MPI_Send(b, n, t, dest, tag, c);
}
static int pz_isend(const void *b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c, MPI_Request *r) {
	return MPI_Isend(b, n, t, dest, tag, c, r);
}
static int pz_ssend(const void *b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c) {
	return MPI_Ssend(b, n, t, dest, tag, c);
}
static int pz_issend(const void *b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c, MPI_Request *r) {
	return MPI_Issend(b, n, t, dest, tag, c, r);
}
static int pz_irecv(void *b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Request *r) {
	return MPI_Irecv(b, n, t, pz_src(src), pz_tag(tag), c, r);
}

/* The hot non-blocking calls again, with every pointer and handle as an
 * integer: cgo checks each argument of pointer type on every call (the
 * MPI handles are pointers in Open MPI), ~0.1 us per call in all. The
 * memory is C's or pinned Go memory; the handles come from pz_comm_u and pz_type_u. */
static uintptr_t pz_comm_u(MPI_Comm c) { return (uintptr_t)c; }
static uintptr_t pz_type_u(MPI_Datatype t) { return (uintptr_t)t; }
static uintptr_t pz_op_u(MPI_Op op) { return (uintptr_t)op; }
static int pz_isend_u(uintptr_t b, int n, uintptr_t t, int dest, int tag, uintptr_t c, uintptr_t r) {
	return MPI_Isend((const void *)b, n, (MPI_Datatype)t, dest, tag, (MPI_Comm)c, (MPI_Request *)r);
}
static int pz_irecv_u(uintptr_t b, int n, uintptr_t t, int src, int tag, uintptr_t c, uintptr_t r) {
	return MPI_Irecv((void *)b, n, (MPI_Datatype)t, pz_src(src), pz_tag(tag), (MPI_Comm)c, (MPI_Request *)r);
}

/* pz_irecv_bottom receives one element of t, a datatype at absolute
 * addresses (pz_type_tail), at MPI_BOTTOM. */
static int pz_irecv_bottom(MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Request *r) {
	return MPI_Irecv(MPI_BOTTOM, 1, t, pz_src(src), pz_tag(tag), c, r);
}

/* Persistent requests (persistent.go). */
static int pz_send_init(const void *b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c, MPI_Request *r) {
	return MPI_Send_init(b, n, t, dest, tag, c, r);
}
static int pz_recv_init(void *b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Request *r) {
	return MPI_Recv_init(b, n, t, pz_src(src), pz_tag(tag), c, r);
}
static int pz_recv_init_bottom(MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Request *r) {
	return MPI_Recv_init(MPI_BOTTOM, 1, t, pz_src(src), pz_tag(tag), c, r);
}
static int pz_start(MPI_Request *r) { return MPI_Start(r); }
static int pz_request_free(MPI_Request *r) { return MPI_Request_free(r); }

/* pz_type_at makes a committed datatype for n elements of t that start off
 * bytes into the buffer, for counts and displacements past INT_MAX (MPI-3
 * counts are ints): blocks of 2^30 elements and a remainder in one struct
 * type, used with a count of 1. The caller frees it (MPI_Type_free) once
 * the operation has started: MPI keeps what a pending operation needs. */
enum { PZ_BLOCK = 1 << 30 };
static int pz_type_at(MPI_Aint off, MPI_Count n, MPI_Datatype t, MPI_Datatype *out) {
	MPI_Aint lb, ext;
	int e = MPI_Type_get_extent(t, &lb, &ext);
	if (e != MPI_SUCCESS) return e;
	MPI_Count q = n / PZ_BLOCK, rem = n % PZ_BLOCK;
	MPI_Datatype parts[2], block = MPI_DATATYPE_NULL, rest = MPI_DATATYPE_NULL;
	int lens[2], k = 0;
	MPI_Aint disp[2];
	if (q > 0) {
		if ((e = MPI_Type_contiguous(PZ_BLOCK, t, &block)) != MPI_SUCCESS) return e;
		parts[k] = block; lens[k] = (int)q; disp[k] = off; k++;
	}
	if (rem > 0) {
		if ((e = MPI_Type_contiguous((int)rem, t, &rest)) != MPI_SUCCESS) goto out;
		parts[k] = rest; lens[k] = 1; disp[k] = off + (MPI_Aint)(q * PZ_BLOCK) * ext; k++;
	}
	if ((e = MPI_Type_create_struct(k, lens, disp, parts, out)) == MPI_SUCCESS) {
		if ((e = MPI_Type_commit(out)) != MPI_SUCCESS) MPI_Type_free(out);
	}
out:
	if (block != MPI_DATATYPE_NULL) MPI_Type_free(&block);
	if (rest != MPI_DATATYPE_NULL) MPI_Type_free(&rest);
	return e;
}
static int pz_type_free(MPI_Datatype *t) { return MPI_Type_free(t); }

/* pz_type_tail makes a committed datatype, used with MPI_BOTTOM and a
 * count of 1, for n bytes at b followed by tn bytes at tail: a receive
 * buffer with room past its end (request.go, wideRecv). The caller frees
 * it once the operation has started. */
static int pz_type_tail(uintptr_t b, MPI_Count n, uintptr_t tail, int tn, MPI_Datatype *out) {
	MPI_Aint ab, at;
	int e = MPI_Get_address((void *)b, &ab);
	if (e == MPI_SUCCESS) e = MPI_Get_address((void *)tail, &at);
	if (e != MPI_SUCCESS) return e;
	MPI_Datatype body;
	if ((e = pz_type_at(ab, n, MPI_BYTE, &body)) != MPI_SUCCESS) return e;
	int lens[2] = {1, tn};
	MPI_Aint disp[2] = {0, at};
	MPI_Datatype parts[2] = {body, MPI_BYTE};
	if ((e = MPI_Type_create_struct(2, lens, disp, parts, out)) == MPI_SUCCESS) {
		if ((e = MPI_Type_commit(out)) != MPI_SUCCESS) MPI_Type_free(out);
	}
	MPI_Type_free(&body);
	return e;
}

/* pz_alltoallw is the large-count path of Gather, AllGather, Scatter and
 * Alltoall: every part is one pz_type_at element (or nothing). */
static int pz_alltoallw(const void *s, const int *sc, const int *sd, const MPI_Datatype *st, void *d, const int *rc, const int *rd, const MPI_Datatype *rt, MPI_Comm c) {
	return MPI_Alltoallw(s, sc, sd, st, d, rc, rd, rt, c);
}
static int pz_ialltoallw(const void *s, const int *sc, const int *sd, const MPI_Datatype *st, void *d, const int *rc, const int *rd, const MPI_Datatype *rt, MPI_Comm c, MPI_Request *r) {
	return MPI_Ialltoallw(s, sc, sd, st, d, rc, rd, rt, c, r);
}

/* PZ_TRUNCATED_SIZE: the status of a receive that failed with
 * MPI_ERR_TRUNCATE counts the whole message (Open MPI's ob1), which pz
 * reports beside the buffer's size. MPICH 4's counts what it wrote, 0,
 * or for a small message to the rank itself a size unrelated to the
 * message (128 or 775 bytes for 24). */
#ifdef OPEN_MPI
enum { PZ_TRUNCATED_SIZE = 1 };
#else
enum { PZ_TRUNCATED_SIZE = 0 };
#endif

/* pz_status is what Go needs from an MPI_Status; cancelled is set for a
 * completed request only (pz_fill_req). */
typedef struct { long long bytes; int source, tag, error, cancelled; } pz_status;

static void pz_fill(const MPI_Status *st, pz_status *out) {
	out->source = st->MPI_SOURCE == MPI_ANY_SOURCE ? -1 : st->MPI_SOURCE;
	out->tag = st->MPI_TAG == MPI_ANY_TAG ? -1 : st->MPI_TAG;
	out->error = st->MPI_ERROR;
	out->cancelled = 0;
	MPI_Count n = 0;
	MPI_Get_elements_x(st, MPI_BYTE, &n); /* counts past INT_MAX too */
	out->bytes = n == MPI_UNDEFINED ? -1 : (long long)n;
}

/* pz_fill_req is pz_fill for the status of a completed request, with
 * MPI_Test_cancelled: whether a request MPI_Cancel was called on was
 * canceled or completed its operation. */
static void pz_fill_req(const MPI_Status *st, pz_status *out) {
	pz_fill(st, out);
	int flag = 0;
	if (MPI_Test_cancelled(st, &flag) == MPI_SUCCESS && flag) out->cancelled = 1;
}

/* pz_cancel_u marks the request at r for cancellation (MPI_Cancel), unless
 * it is MPI_REQUEST_NULL: a request that MPI_Wait on another thread has
 * just completed and freed (MPI_Cancel of the null request is an error
 * that Open MPI raises on no communicator, where it is fatal). */
static int pz_cancel_u(uintptr_t r) {
	MPI_Request *req = (MPI_Request *)r;
	if (*req == MPI_REQUEST_NULL) return MPI_SUCCESS;
	return MPI_Cancel(req);
}

/* pz_mprobe / pz_improbe match a message and report its size in bytes. */
static int pz_mprobe(int src, int tag, MPI_Comm c, MPI_Message *m, pz_status *out) {
	MPI_Status st;
	int e = MPI_Mprobe(pz_src(src), pz_tag(tag), c, m, &st);
	if (e == MPI_SUCCESS) pz_fill(&st, out);
	return e;
}
/* pz_improbe returns its results by value: the address of a Go
 * MPI_Message (a pointer type) passed to C costs a cgo pointer check on
 * every test of a polled wait (about a tenth of an 8-byte polled
 * round trip); a returned struct costs none. */
typedef struct { int rc, flag; MPI_Message m; pz_status st; } pz_probed;
static pz_probed pz_improbe(int src, int tag, MPI_Comm c) {
	MPI_Status st;
	pz_probed r;
	r.flag = 0;
	r.m = MPI_MESSAGE_NULL;
	r.rc = MPI_Improbe(pz_src(src), pz_tag(tag), c, &r.flag, &r.m, &st);
	if (r.rc == MPI_SUCCESS && r.flag) pz_fill(&st, &r.st);
	return r;
}
static int pz_mrecv(void *b, int n, MPI_Datatype t, MPI_Message *m, pz_status *out) {
	MPI_Status st;
	st.MPI_ERROR = MPI_SUCCESS;
	int e = MPI_Mrecv(b, n, t, m, &st);
	pz_fill(&st, out);
	return e;
}

/* pz_recv is MPI_Recv with the message's status. */
static int pz_recv(void *b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, pz_status *out) {
	MPI_Status s;
	s.MPI_ERROR = MPI_SUCCESS;
	s.MPI_SOURCE = MPI_ANY_SOURCE;
	s.MPI_TAG = MPI_ANY_TAG;
	int e = MPI_Recv(b, n, t, pz_src(src), pz_tag(tag), c, &s);
	pz_fill(&s, out);
	return e;
}

/* pz_sendrecv is MPI_Sendrecv with the received message's status. */
static int pz_sendrecv(const void *sb, int sn, MPI_Datatype st, int dest, int stag, void *rb, int rn, MPI_Datatype rt, int src, int rtag, MPI_Comm c, pz_status *out) {
	MPI_Status s;
	s.MPI_ERROR = MPI_SUCCESS;
	s.MPI_SOURCE = MPI_ANY_SOURCE;
	s.MPI_TAG = MPI_ANY_TAG;
	int e = MPI_Sendrecv(sb, sn, st, dest, stag, rb, rn, rt, pz_src(src), pz_tag(rtag), c, &s);
	pz_fill(&s, out);
	return e;
}

static int pz_wait(MPI_Request *r, pz_status *out) {
	MPI_Status st;
	st.MPI_ERROR = MPI_SUCCESS;
	st.MPI_SOURCE = MPI_ANY_SOURCE;
	st.MPI_TAG = MPI_ANY_TAG;
	int e = MPI_Wait(r, &st);
	pz_fill_req(&st, out);
	return e;
}
static int pz_test(MPI_Request *r, int *flag, pz_status *out) {
	MPI_Status st;
	st.MPI_ERROR = MPI_SUCCESS;
	st.MPI_SOURCE = MPI_ANY_SOURCE;
	st.MPI_TAG = MPI_ANY_TAG;
	int e = MPI_Test(r, flag, &st);
	if (*flag) pz_fill_req(&st, out);
	return e;
}

static int pz_wait_u(uintptr_t r, uintptr_t out) { return pz_wait((MPI_Request *)r, (pz_status *)out); }
static int pz_test_u(uintptr_t r, uintptr_t flag, uintptr_t out) {
	return pz_test((MPI_Request *)r, (int *)flag, (pz_status *)out);
}

/* pz_testsome tests n requests with one MPI_Testsome (one pass of MPI's
 * progress instead of n): reqs holds their handles and gets them back
 * updated; idx and sts are scratch of n entries. For each request that
 * completed, done[i] is set and out[i] holds its status, whose error is
 * the operation's own (MPI sets MPI_ERROR only with MPI_ERR_IN_STATUS).
 * Returns MPI_SUCCESS then (each operation's error is in its status), or
 * the call's error code, when nothing is known about the requests. */
static int pz_testsome(int n, MPI_Request *reqs, int *idx, MPI_Status *sts, int *done, pz_status *out) {
	int cnt = 0;
	int e = MPI_Testsome(n, reqs, &cnt, idx, sts);
	if (e != MPI_SUCCESS && e != MPI_ERR_IN_STATUS) return e;
	if (cnt == MPI_UNDEFINED) cnt = 0;
	for (int k = 0; k < cnt; k++) {
		int i = idx[k];
		if (e == MPI_SUCCESS) sts[k].MPI_ERROR = MPI_SUCCESS;
		done[i] = 1;
		pz_fill_req(&sts[k], &out[i]);
	}
	return MPI_SUCCESS;
}

static int pz_comm_split(MPI_Comm c, int color, int key, MPI_Comm *out) {
	return MPI_Comm_split(c, color, key, out);
}
/* pz_comm_compare compares two communicators: 0 ident, 1 congruent,
 * 2 similar, 3 unequal (comm.Relation's order). */
static int pz_comm_compare(MPI_Comm a, MPI_Comm b, int *rel) {
	int r;
	int e = MPI_Comm_compare(a, b, &r);
	if (e != MPI_SUCCESS) return e;
	*rel = r == MPI_IDENT ? 0 : r == MPI_CONGRUENT ? 1 : r == MPI_SIMILAR ? 2 : 3;
	return MPI_SUCCESS;
}

/* pz_comm_split_shared splits c into the ranks that share this node's
 * memory (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED). */
static int pz_comm_split_shared(MPI_Comm c, int key, MPI_Comm *out) {
	return MPI_Comm_split_type(c, MPI_COMM_TYPE_SHARED, key, MPI_INFO_NULL, out);
}
static int pz_comm_free(MPI_Comm *c) { return MPI_Comm_free(c); }

/* Handles crossing to and from C and Fortran libraries: an MPI_Comm is a
 * pointer in Open MPI and an int in MPICH; both fit a uintptr_t. */
static MPI_Comm pz_comm_of(uintptr_t h) { return (MPI_Comm)h; }
static uintptr_t pz_comm_handle(MPI_Comm c) { return (uintptr_t)c; }
static MPI_Comm pz_comm_f2c(int64_t f) { return MPI_Comm_f2c((MPI_Fint)f); }
static int64_t pz_comm_c2f(MPI_Comm c) { return (int64_t)MPI_Comm_c2f(c); }
static int pz_comm_is_null(MPI_Comm c) { return c == MPI_COMM_NULL; }
static int pz_comm_dup(MPI_Comm c, MPI_Comm *out) { return MPI_Comm_dup(c, out); }


/* pz_iprobe / pz_probe look at a message without receiving it. */
static int pz_iprobe(int src, int tag, MPI_Comm c, int *flag, pz_status *out) {
	MPI_Status st;
	int e = MPI_Iprobe(pz_src(src), pz_tag(tag), c, flag, &st);
	if (e == MPI_SUCCESS && *flag) pz_fill(&st, out);
	return e;
}
static int pz_probe(int src, int tag, MPI_Comm c, pz_status *out) {
	MPI_Status st;
	int e = MPI_Probe(pz_src(src), pz_tag(tag), c, &st);
	if (e == MPI_SUCCESS) pz_fill(&st, out);
	return e;
}
static int pz_abort(MPI_Comm c, int code) { return MPI_Abort(c, code); }

/* Collectives on memory given by address (device.go): memory outside Go's
 * heap, a CUDA GPU's where the library is CUDA-aware. The addresses cross
 * as integers and become pointers only here, so Go never holds one in an
 * unsafe.Pointer and cgo has nothing to check. */
static int pz_bcast_at(uintptr_t b, int n, MPI_Datatype t, int root, MPI_Comm c) {
	return MPI_Bcast((void *)b, n, t, root, c);
}
static int pz_ibcast_at(uintptr_t b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request *r) {
	return MPI_Ibcast((void *)b, n, t, root, c, r);
}
static int pz_reduce_at(uintptr_t s, uintptr_t d, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c, int inplace) {
	return pz_reduce((const void *)s, (void *)d, n, t, op, root, c, inplace);
}
static int pz_ireduce_at(uintptr_t s, uintptr_t d, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c, int inplace, MPI_Request *r) {
	return MPI_Ireduce(pz_in((const void *)s, inplace), (void *)d, n, t, op, root, c, r);
}
/* pz_iallreduce_at_in is pz_iallreduce_at with the in-place flag. */
static int pz_iallreduce_at_in(uintptr_t s, uintptr_t d, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, int inplace, MPI_Request *r) {
	return MPI_Iallreduce(pz_in((const void *)s, inplace), (void *)d, n, t, op, c, r);
}
static int pz_gatherv_at(uintptr_t s, int sn, uintptr_t d, const int *counts, const int *displs, MPI_Datatype t, int root, MPI_Comm c) {
	return MPI_Gatherv((const void *)s, sn, t, (void *)d, counts, displs, t, root, c);
}
static int pz_igatherv_at(uintptr_t s, int sn, uintptr_t d, const int *counts, const int *displs, MPI_Datatype t, int root, MPI_Comm c, MPI_Request *r) {
	return MPI_Igatherv((const void *)s, sn, t, (void *)d, counts, displs, t, root, c, r);
}
static int pz_scatterv_at(uintptr_t s, const int *counts, const int *displs, uintptr_t d, int dn, MPI_Datatype t, int root, MPI_Comm c) {
	return MPI_Scatterv((const void *)s, counts, displs, t, (void *)d, dn, t, root, c);
}
static int pz_iscatterv_at(uintptr_t s, const int *counts, const int *displs, uintptr_t d, int dn, MPI_Datatype t, int root, MPI_Comm c, MPI_Request *r) {
	return MPI_Iscatterv((const void *)s, counts, displs, t, (void *)d, dn, t, root, c, r);
}
static int pz_allgatherv_at(uintptr_t s, int sn, uintptr_t d, const int *counts, const int *displs, MPI_Datatype t, MPI_Comm c) {
	return MPI_Allgatherv((const void *)s, sn, t, (void *)d, counts, displs, t, c);
}
static int pz_iallgatherv_at(uintptr_t s, int sn, uintptr_t d, const int *counts, const int *displs, MPI_Datatype t, MPI_Comm c, MPI_Request *r) {
	return MPI_Iallgatherv((const void *)s, sn, t, (void *)d, counts, displs, t, c, r);
}

/* pz_cuda_aware reports whether the library in this process moves CUDA
 * device memory itself, asked at run time (the binary may run on another
 * machine's build of the same library): Open MPI's
 * MPIX_Query_cuda_support (mpi-ext.h, when its CUDA extension is built;
 * Debian's header says MPIX_CUDA_AWARE_SUPPORT 0 at compile time, but a
 * CUDA-aware libmpi.so.40 answers 1), MPICH 4's MPIX_GPU_query_support;
 * 0 for any other library. Call it after MPI_Init. */
#if defined(OPEN_MPI) && defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif
static int pz_cuda_aware(void) {
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
	return MPIX_Query_cuda_support() != 0;
#elif defined(MPIX_GPU_SUPPORT_CUDA)
	int yes = 0;
	if (MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &yes) != MPI_SUCCESS) return 0;
	return yes != 0;
#else
	return 0;
#endif
}

#endif
