/*
 * halo.c - the floor of comm/mpi's one-shot halo exchange, in C: each rank
 * posts MPI_Irecv from the previous rank of a ring and MPI_Isend to the
 * next, then MPI_Waitall, back to back (no barrier between iterations),
 * as comm/mpi's BenchmarkP2P/halo times pz's Irecv, Isend and
 * comm.WaitAll. The MPI thread level is pz's question: pz asks for
 * MPI_THREAD_MULTIPLE, which costs Open MPI 4.1 a third more at 8 bytes.
 *
 *   mpicc -O2 -o /tmp/halo comm/commbench/cpeer/halo.c
 *   mpirun -n 2 /tmp/halo [single|multiple] [bytes]
 *
 * Output (rank 0): "<thread level> halo <bytes> B <mean ns per exchange>",
 * three rounds of 300000 exchanges.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
	int multiple = argc > 1 && !strcmp(argv[1], "multiple");
	int bytes = argc > 2 ? atoi(argv[2]) : 8;
	int prov;
	MPI_Init_thread(&argc, &argv, multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &prov);
	int me, n;
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	char *send = calloc(bytes, 1), *recv = calloc(bytes, 1);
	int right = (me + 1) % n, left = (me + n - 1) % n;
	const int iters = 300000;
	for (int round = 0; round < 3; round++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		for (int i = 0; i < iters; i++) {
			MPI_Request q[2];
			MPI_Irecv(recv, bytes, MPI_BYTE, left, 7, MPI_COMM_WORLD, &q[0]);
			MPI_Isend(send, bytes, MPI_BYTE, right, 7, MPI_COMM_WORLD, &q[1]);
			MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
		}
		double dt = MPI_Wtime() - t0;
		if (me == 0)
			printf("%s halo %d B %.1f ns\n", multiple ? "multiple" : "single", bytes, dt / iters * 1e9);
	}
	free(send);
	free(recv);
	MPI_Finalize();
	return 0;
}
