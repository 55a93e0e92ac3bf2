/*
 * agreestep.c - the floor of comm/mpi's fused agreement step, in C.
 *
 * With the agreement check on, an 8-byte AllReduce on the MPI backend is
 * one MPI_Allreduce of one pz_agree_t-sized element (comm/mpi/pz_agree.h:
 * four header words combined with max, a payload code, a root flag and 64
 * bytes of payload) with a user op that maxes the header and sums the
 * payload. This program times that call beside the plain 8-byte
 * MPI_Allreduce of one double with MPI_SUM, timed as collbench.c times
 * its collectives (MPI_Barrier; t0; op; t1; the maximum over ranks per
 * iteration; the median of those), so that pz's figure can be split into
 * what the check's design costs in C and what pz's Go side adds.
 *
 *   mpicc -O2 -o /tmp/agreestep comm/commbench/cpeer/agreestep.c
 *   mpirun -n 2 /tmp/agreestep [single|multiple]
 *
 * Output (rank 0): "<thread level> <case> <median µs>", cases "sum8"
 * (MPI_SUM of one double) and "agree" (the fused element and op).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	int64_t h[4];
	int64_t pay;
	int64_t root;
	unsigned char payload[64];
} agree_t;

static void agree_fn(void *inv, void *iov, int *len, MPI_Datatype *dt) {
	agree_t *in = inv, *io = iov;
	(void)dt;
	for (int e = 0; e < *len; e++, in++, io++) {
		for (int i = 0; i < 4; i++)
			if (in->h[i] > io->h[i]) io->h[i] = in->h[i];
		if (in->pay != io->pay) {
			io->pay = 0;
			continue;
		}
		double a, b;
		memcpy(&a, in->payload, sizeof a);
		memcpy(&b, io->payload, sizeof b);
		b += a;
		memcpy(io->payload, &b, sizeof b);
	}
}

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv) {
	const char *level = argc > 1 ? argv[1] : "single";
	int provided, rank;
	MPI_Init_thread(&argc, &argv, strcmp(level, "multiple") ? MPI_THREAD_SINGLE : MPI_THREAD_MULTIPLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Datatype t;
	MPI_Op op;
	MPI_Type_contiguous((int)sizeof(agree_t), MPI_BYTE, &t);
	MPI_Type_commit(&t);
	MPI_Op_create(agree_fn, 1, &op);
	agree_t in, out;
	memset(&in, 0, sizeof in);
	in.pay = (int64_t)10 << 24 | (int64_t)1 << 16 | 8; /* float64, sum, 8 bytes */
	double one = 1, sum;
	enum { WARM = 1000, N = 20000 };
	double *ts = malloc(N * sizeof *ts);
	for (int c = 0; c < 2; c++) {
		for (int i = -WARM; i < N; i++) {
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = MPI_Wtime();
			if (c == 0)
				MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
			else
				MPI_Allreduce(&in, &out, 1, t, op, MPI_COMM_WORLD);
			if (i >= 0) ts[i] = MPI_Wtime() - t0;
		}
		MPI_Allreduce(MPI_IN_PLACE, ts, N, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		qsort(ts, N, sizeof *ts, cmp);
		if (rank == 0) printf("%s %s %.3f\n", level, c == 0 ? "sum8" : "agree", ts[N / 2] * 1e6);
	}
	free(ts);
	MPI_Op_free(&op);
	MPI_Type_free(&t);
	MPI_Finalize();
	return 0;
}
