//go:build mpi

/* The C side of user reductions (userop.go): MPI calls pz_user_fn with no
 * user data, so the Go function travels as an attribute of the datatype
 * of the call (a duplicate of the element type, made per call). */
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

extern void pzUserCombine(uintptr_t call, void *in, void *inout, int len);

/* The attribute key and the two ops, made by the first pz_user_acquire and
 * freed by the last pz_user_release: the World of an adopted MPI frees
 * what it made when its Finalize ends pz's use of MPI, while another World
 * on the same MPI (runtimeview adopts the MPI a World of the program
 * started) may still use them. MPI calls pz_user_fn with no user data,
 * so the key is process-wide; pz_user_mu guards it, the ops and the count
 * (Worlds on an MPI_THREAD_MULTIPLE MPI acquire and release them from any
 * thread). */
static pthread_mutex_t pz_user_mu = PTHREAD_MUTEX_INITIALIZER;
static int pz_user_refs = 0;
static int pz_user_key = MPI_KEYVAL_INVALID;
static MPI_Op pz_user_ops[2] = {MPI_OP_NULL, MPI_OP_NULL}; /* not commuting, commuting */

static void pz_user_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
	void *val;
	int flag = 0;
	if (MPI_Type_get_attr(*dt, pz_user_key, &val, &flag) == MPI_SUCCESS && flag)
		pzUserCombine((uintptr_t)val, in, inout, *len);
}

static void pz_user_free_locked(void) {
	if (pz_user_ops[0] != MPI_OP_NULL) MPI_Op_free(&pz_user_ops[0]);
	if (pz_user_ops[1] != MPI_OP_NULL) MPI_Op_free(&pz_user_ops[1]);
	if (pz_user_key != MPI_KEYVAL_INVALID) MPI_Type_free_keyval(&pz_user_key);
	pz_user_ops[0] = pz_user_ops[1] = MPI_OP_NULL;
	pz_user_key = MPI_KEYVAL_INVALID;
}

/* pz_user_acquire takes a reference to the key and the ops, making them
 * on the first; a World takes one at most (state.userAcquire). */
int pz_user_acquire(void) {
	int e = MPI_SUCCESS;
	pthread_mutex_lock(&pz_user_mu);
	if (pz_user_refs == 0) {
		if ((e = MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &pz_user_key, NULL)) == MPI_SUCCESS &&
		    (e = MPI_Op_create(pz_user_fn, 0, &pz_user_ops[0])) == MPI_SUCCESS)
			e = MPI_Op_create(pz_user_fn, 1, &pz_user_ops[1]);
		if (e != MPI_SUCCESS) pz_user_free_locked();
	}
	if (e == MPI_SUCCESS) pz_user_refs++;
	pthread_mutex_unlock(&pz_user_mu);
	return e;
}

/* pz_user_release drops a reference taken by pz_user_acquire and frees the
 * key and the ops with the last (an adopted World's Finalize; MPI_Finalize
 * frees them when pz finalizes MPI). */
void pz_user_release(void) {
	pthread_mutex_lock(&pz_user_mu);
	if (pz_user_refs > 0 && --pz_user_refs == 0) pz_user_free_locked();
	pthread_mutex_unlock(&pz_user_mu);
}

/* pz_user_type duplicates t and attaches the call's handle to it. */
int pz_user_type(MPI_Datatype t, uintptr_t call, MPI_Datatype *out) {
	int e = MPI_Type_dup(t, out);
	if (e != MPI_SUCCESS) return e;
	if ((e = MPI_Type_set_attr(*out, pz_user_key, (void *)call)) != MPI_SUCCESS) MPI_Type_free(out);
	return e;
}

MPI_Op pz_user_op(int commute) { return pz_user_ops[commute != 0]; }
