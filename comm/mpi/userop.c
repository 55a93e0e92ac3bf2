//go:build mpi

/* The C side of user reductions (userop.go): MPI calls pz_user_fn with no
 * user data, so the Go function travels as an attribute of the datatype
 * of the call (a duplicate of the element type, made per call). */
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

extern void pzUserCombine(uintptr_t call, void *in, void *inout, int len);

/* The attribute key, made once by pz_user_init (MPI_Init is process-wide,
 * and so is this key). */
static int pz_user_key = MPI_KEYVAL_INVALID;
static MPI_Op pz_user_ops[2] = {MPI_OP_NULL, MPI_OP_NULL}; /* not commuting, commuting */

static void pz_user_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
	void *val;
	int flag = 0;
	if (MPI_Type_get_attr(*dt, pz_user_key, &val, &flag) == MPI_SUCCESS && flag)
		pzUserCombine((uintptr_t)val, in, inout, *len);
}

int pz_user_init(void) {
	int e;
	if (pz_user_key != MPI_KEYVAL_INVALID) return MPI_SUCCESS;
	if ((e = MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &pz_user_key, NULL)) != MPI_SUCCESS) return e;
	if ((e = MPI_Op_create(pz_user_fn, 0, &pz_user_ops[0])) != MPI_SUCCESS) return e;
	return MPI_Op_create(pz_user_fn, 1, &pz_user_ops[1]);
}

/* pz_user_type duplicates t and attaches the call's handle to it. */
int pz_user_type(MPI_Datatype t, uintptr_t call, MPI_Datatype *out) {
	int e = MPI_Type_dup(t, out);
	if (e != MPI_SUCCESS) return e;
	if ((e = MPI_Type_set_attr(*out, pz_user_key, (void *)call)) != MPI_SUCCESS) MPI_Type_free(out);
	return e;
}

MPI_Op pz_user_op(int commute) { return pz_user_ops[commute != 0]; }
