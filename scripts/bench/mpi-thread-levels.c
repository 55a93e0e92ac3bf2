/*
 * mpi-thread-levels.c: what MPI's thread level costs an 8-byte
 * MPI_Allreduce, back to back, in C (docs/performance.md, "Where the
 * 8-byte MPI target stands"). LEVEL is the level asked of
 * MPI_Init_thread: 0 single, 1 funneled, 2 serialized, 3 multiple.
 * Rank 0 prints ns per call for each of 6 rounds of 200,000 calls;
 * take the minimum, and alternate the levels between runs:
 *
 *   mpicc -O2 -o /tmp/mpi-thread-levels scripts/bench/mpi-thread-levels.c
 *   for l in 0 1 2 3; do mpirun -n 2 /tmp/mpi-thread-levels $l; done
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: %s LEVEL (0 single, 1 funneled, 2 serialized, 3 multiple)\n", argv[0]);
		return 2;
	}
	int level = atoi(argv[1]), provided, rank;
	MPI_Init_thread(&argc, &argv, level, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	const int n = 200000;
	double x = rank + 1, y;
	for (int round = 0; round < 6; round++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = now_ns();
		for (int i = 0; i < n; i++)
			MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		double t1 = now_ns();
		if (rank == 0)
			printf("level %d (provided %d): %.0f ns per 8-byte MPI_Allreduce\n", level, provided, (t1 - t0) / n);
	}
	MPI_Finalize();
	return 0;
}
