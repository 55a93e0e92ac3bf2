//go:build mpi

/* MPI_COMM_WORLD's error handler on an adopted MPI. pz sets
 * MPI_ERRORS_RETURN on the world (pz_comm_setup) while it uses an MPI
 * that the program initialized, and gives the program's handler back when
 * its use ends. Several Worlds may adopt one MPI (runtimeview adopts the
 * MPI a World of the program uses) and end in any order, so the handler
 * is saved by the first pz_errh_acquire, while the world still has the
 * program's, and set back by the last pz_errh_release; pz_errh_mu guards
 * the count and the handler (Worlds on an MPI_THREAD_MULTIPLE MPI call
 * them from any thread). */
#include <mpi.h>
#include <pthread.h>

static pthread_mutex_t pz_errh_mu = PTHREAD_MUTEX_INITIALIZER;
static int pz_errh_refs = 0;
static MPI_Errhandler pz_errh_saved = MPI_ERRHANDLER_NULL;

/* pz_errh_acquire takes a reference, saving world's handler on the first. */
int pz_errh_acquire(MPI_Comm world) {
	int e = MPI_SUCCESS;
	pthread_mutex_lock(&pz_errh_mu);
	if (pz_errh_refs == 0) e = MPI_Comm_get_errhandler(world, &pz_errh_saved);
	if (e == MPI_SUCCESS) pz_errh_refs++;
	pthread_mutex_unlock(&pz_errh_mu);
	return e;
}

/* pz_errh_release drops a reference taken by pz_errh_acquire and, with the
 * last, gives world the handler saved by the first. */
int pz_errh_release(MPI_Comm world) {
	int e = MPI_SUCCESS, f = MPI_SUCCESS;
	pthread_mutex_lock(&pz_errh_mu);
	if (pz_errh_refs > 0 && --pz_errh_refs == 0) {
		e = MPI_Comm_set_errhandler(world, pz_errh_saved);
		f = MPI_Errhandler_free(&pz_errh_saved);
		pz_errh_saved = MPI_ERRHANDLER_NULL;
	}
	pthread_mutex_unlock(&pz_errh_mu);
	return e != MPI_SUCCESS ? e : f;
}

/* pz_errh_refs_held is the number of references held (tests: what a failed
 * Init left). */
int pz_errh_refs_held(void) {
	pthread_mutex_lock(&pz_errh_mu);
	int n = pz_errh_refs;
	pthread_mutex_unlock(&pz_errh_mu);
	return n;
}
