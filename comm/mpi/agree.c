//go:build mpi

/* The agreement step's reduction (pz_agree.h). The payload ops follow
 * comm.ReduceInto: integers wrap, logical ops yield 0 or 1, float Min and
 * Max follow Go's min and max (a NaN wins, min(-0, +0) is -0). Type and op
 * codes are comm.Datatype and comm.Op. */
#include <math.h>
#include <string.h>
#include "pz_agree.h"
#include "pz_slot.h"

#define LOOP(T, EXPR)                                                   \
	do {                                                            \
		const T *a_ = (const T *)in;                            \
		T *b_ = (T *)inout;                                     \
		for (int i_ = 0; i_ < n / (int)sizeof(T); i_++) {       \
			T x = a_[i_], y = b_[i_];                       \
			b_[i_] = (EXPR);                                \
		}                                                       \
	} while (0)

/* Integers: arithmetic in the unsigned type U, so that signed sums wrap
 * instead of being undefined. */
#define INT_OPS(T, U)                                                   \
	switch (op) {                                                   \
	case 1: LOOP(T, (T)((U)x + (U)y)); return 1;                    \
	case 2: LOOP(T, (T)((U)x * (U)y)); return 1;                    \
	case 3: LOOP(T, y < x ? y : x); return 1;                       \
	case 4: LOOP(T, y > x ? y : x); return 1;                       \
	case 5: LOOP(T, (T)(x != 0 && y != 0)); return 1;               \
	case 6: LOOP(T, (T)(x != 0 || y != 0)); return 1;               \
	case 7: LOOP(T, x & y); return 1;                               \
	case 8: LOOP(T, x | y); return 1;                               \
	case 9: LOOP(T, x ^ y); return 1;                               \
	case 10: LOOP(T, (T)((x != 0) != (y != 0))); return 1;          \
	}                                                               \
	return 0

/* Go's min and max: a NaN operand wins; -0 is below +0. */
#define FMIN(x, y) (isnan(x) ? (x) : isnan(y) ? (y) : (x) < (y) ? (x) : (y) < (x) ? (y) : signbit(x) ? (x) : (y))
#define FMAX(x, y) (isnan(x) ? (x) : isnan(y) ? (y) : (x) > (y) ? (x) : (y) > (x) ? (y) : signbit(x) ? (y) : (x))

#define FLOAT_OPS(T)                                                    \
	switch (op) {                                                   \
	case 1: LOOP(T, x + y); return 1;                               \
	case 2: LOOP(T, x * y); return 1;                               \
	case 3: LOOP(T, FMIN(x, y)); return 1;                          \
	case 4: LOOP(T, FMAX(x, y)); return 1;                          \
	}                                                               \
	return 0

/* combine folds in into inout (n bytes) and reports whether it knows the
 * type and op; pz_agree_code says which pairs ride in the payload, and
 * agree_test.go checks the two agree. Each operand is on the left of the
 * other on some rank, so only commutative results are used. */
static int combine(int type, int op, const void *in, void *inout, int n) {
	switch (type) {
	case 1: INT_OPS(int8_t, uint8_t);
	case 2: INT_OPS(int16_t, uint16_t);
	case 3: INT_OPS(int32_t, uint32_t);
	case 4: INT_OPS(int64_t, uint64_t);
	case 5: INT_OPS(uint8_t, uint8_t);
	case 6: INT_OPS(uint16_t, uint16_t);
	case 7: INT_OPS(uint32_t, uint32_t);
	case 8: INT_OPS(uint64_t, uint64_t);
	case 9: FLOAT_OPS(float);
	case 10: FLOAT_OPS(double);
	}
	return 0;
}

static void pz_agree_fn(void *inv, void *inoutv, int *len, MPI_Datatype *dt) {
	const pz_agree_t *in = inv;
	pz_agree_t *io = inoutv;
	(void)dt;
	for (int e = 0; e < *len; e++, in++, io++) {
		for (int i = 0; i < 4; i++)
			if (in->h[i] > io->h[i]) io->h[i] = in->h[i];
		if (in->pay != io->pay) {
			io->pay = 0; /* the ranks disagree: the header says so */
			continue;
		}
		int n = (int)(io->pay & 0xffff), type = (int)(io->pay >> 24) & 0xff;
		if (io->pay == 0 || n > PZ_AGREE_PAYLOAD) {
			io->pay = 0;
		} else if (type == PZ_AGREE_BCAST) {
			/* One rank is root: whichever operand carries its bytes wins. */
			if (in->root && !io->root) {
				memcpy(io->payload, in->payload, (size_t)n);
				io->root = 1;
			}
		} else if (!combine(type, (int)(io->pay >> 16) & 0xff, in->payload, io->payload, n)) {
			io->pay = 0;
		}
	}
}

/* pz_agree_init makes the element type and the op; MPI must be
 * initialized. Both live until MPI_Finalize. */
int pz_agree_init(MPI_Datatype *type, MPI_Op *op) {
	int e = MPI_Type_contiguous((int)sizeof(pz_agree_t), MPI_BYTE, type);
	if (e != MPI_SUCCESS) return e;
	if ((e = MPI_Type_commit(type)) != MPI_SUCCESS) return e;
	return MPI_Op_create(pz_agree_fn, 1, op);
}

void pz_agree_free(MPI_Datatype *type, MPI_Op *op) {
	if (*op != MPI_OP_NULL) MPI_Op_free(op);
	if (*type != MPI_DATATYPE_NULL) MPI_Type_free(type);
}

/* pz_agree_combine is pz_agree_fn for tests (agree_test.go). */
void pz_agree_combine(pz_agree_t *in, pz_agree_t *inout) {
	int one = 1;
	pz_agree_fn(in, inout, &one, NULL);
}

/* pz_agree_step is the blocking agreement step in one call from Go
 * (agree.go, Comm.fused): agree is the Comm's pz_agree_t pair (in, out),
 * whose header Go has set. It copies send_n bytes of send into in's
 * payload, marks the collective seq in progress in the stall watch's slot
 * (slot: the address of a collSlot's seq, or 0), allreduces in into out,
 * clears the slot, and when every rank agreed and the payload was combined
 * copies recv_n bytes of out's payload to recv. It returns 0 then, -1 when
 * the step ran but Go has to look at out (a failure, a mismatch, a payload
 * not carried), or MPI's error code. The addresses are of memory Go keeps
 * alive for the call and the handles are integers, so that cgo checks no
 * pointer; the watch's slot is set around the call (pz_slot.h). */
int pz_agree_step(uintptr_t agree, uintptr_t send, int send_n, uintptr_t recv, int recv_n,
                  uintptr_t slot, uint64_t seq, uintptr_t t, uintptr_t op, uintptr_t c) {
	pz_agree_t *in = (pz_agree_t *)agree, *out = in + 1;
	if (send_n > 0) memcpy(in->payload, (const void *)send, (size_t)send_n);
	pz_slot_set(slot, seq);
	int rc = MPI_Allreduce(in, out, 1, (MPI_Datatype)t, (MPI_Op)op, (MPI_Comm)c);
	pz_slot_clear(slot);
	if (rc != MPI_SUCCESS) return rc;
	if (out->h[2] != 0 || out->h[0] != -out->h[1] || in->pay == 0 || out->pay != in->pay) return -1;
	if (recv_n > 0) memcpy((void *)recv, out->payload, (size_t)recv_n);
	return 0;
}
