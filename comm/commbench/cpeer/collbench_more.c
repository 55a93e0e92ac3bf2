/*
 * collbench_more.c - the C MPI peer of pz's collectives beyond collbench.c
 * (../shared/peers/mpi): a user-defined reduction, Gatherv and Alltoallv,
 * timed exactly as collbench.c times its collectives (MPI_Barrier; t0; op;
 * t1; the maximum over ranks per iteration; the median of those), with the
 * same iteration schedule and output lines:
 *
 *   collective size ranks median_us algbw_GBps busbw_GBps iters
 *
 *   allreduce_user  MPI_Allreduce of doubles with an MPI_Op_create'd sum
 *   gatherv         every rank's size bytes to root 0, the parts in rank
 *                   order with a gap of one double before each (a padded
 *                   layout)
 *   alltoallv       size/ranks bytes (whole doubles) to every rank, parts
 *                   back to back
 *   halo            size bytes to the next rank of a ring and from the
 *                   previous one: MPI_Irecv, MPI_Isend, MPI_Waitall
 *   halo_persistent the same with requests made once per size
 *                   (MPI_Recv_init, MPI_Send_init), each iteration an
 *                   MPI_Startall and MPI_Waitall
 *   scan            MPI_Scan of doubles, sum
 *   reduce_scatter_block  MPI_Reduce_scatter_block of doubles, sum: size
 *                   bytes in (at least one double per rank), size/ranks
 *                   out
 *   allreduce_maxloc MPI_Allreduce of (double, int) pairs (MPI_DOUBLE_INT,
 *                   MPI_MAXLOC), size/16 of them (at least one)
 *   sendrecv        MPI_Sendrecv of size bytes to the next rank of a ring
 *                   and from the previous one
 *   iallreduce      MPI_Iallreduce of doubles, sum, then MPI_Wait
 *
 * Usage: mpirun -n N ./collbench_more [iter_scale [thread_level]]
 * pz compiles and runs it beside collbench.c (comm/commbench.RunPeer).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int iters_for(size_t bytes, double scale) {
    int it;
    if (bytes <= 1024) it = 2000;
    else if (bytes <= 65536) it = 500;
    else if (bytes <= (1u << 20)) it = 100;
    else it = 20;
    it = (int)(it * scale);
    return it < 5 ? 5 : it;
}

static void sum_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
    double *a = in, *b = inout;
    (void)dt;
    for (int i = 0; i < *len; i++) b[i] = a[i] + b[i];
}

enum { USER, GATHERV, ALLTOALLV, HALO, HALO_PERSISTENT, SCAN, RSB, MAXLOC, SENDRECV, IALLREDUCE, NCOLL };
static const char *names[NCOLL] = {"allreduce_user", "gatherv", "alltoallv", "halo", "halo_persistent",
                                   "scan", "reduce_scatter_block", "allreduce_maxloc", "sendrecv", "iallreduce"};

typedef struct { double v; int i; } double_int;

int main(int argc, char **argv) {
    static const size_t sizes[] = {8, 1024, 65536, 1u << 20, 16u << 20};
    const int nsizes = 5;
    double scale = argc > 1 ? atof(argv[1]) : 1.0;
    const char *tl = argc > 2 ? argv[2] : "single";
    int req = MPI_THREAD_SINGLE, prov = 0, rank, n;
    if (!strcmp(tl, "funneled")) req = MPI_THREAD_FUNNELED;
    else if (!strcmp(tl, "serialized")) req = MPI_THREAD_SERIALIZED;
    else if (!strcmp(tl, "multiple")) req = MPI_THREAD_MULTIPLE;
    if (req == MPI_THREAD_SINGLE) MPI_Init(&argc, &argv);
    else MPI_Init_thread(&argc, &argv, req, &prov);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);

    MPI_Op user;
    MPI_Op_create(sum_fn, 1, &user);
    size_t maxb = sizes[nsizes - 1];
    double *sbuf = malloc(maxb + 8 * (size_t)n), *rbuf = malloc((maxb + 8) * (size_t)n);
    double_int *lin = malloc(sizeof(double_int) * (maxb / 16 + 1)), *lout = malloc(sizeof(double_int) * (maxb / 16 + 1));
    int *sc = malloc(sizeof(int) * n), *sd = malloc(sizeof(int) * n);
    int *rc = malloc(sizeof(int) * n), *rd = malloc(sizeof(int) * n);
    if (!sbuf || !rbuf || !sc || !sd || !rc || !rd || !lin || !lout) { fprintf(stderr, "oom\n"); MPI_Abort(MPI_COMM_WORLD, 1); }
    for (size_t i = 0; i < maxb / 8 + (size_t)n; i++) sbuf[i] = rank + 1.0;
    for (size_t i = 0; i < maxb / 16 + 1; i++) { lin[i].v = (double)((rank * 7 + i) % 5); lin[i].i = rank; }
    memset(rbuf, 0, (maxb + 8) * (size_t)n);
    if (rank == 0) printf("# collective size ranks median_us algbw_GBps busbw_GBps iters\n");

    for (int c = 0; c < NCOLL; c++) {
        for (int s = 0; s < nsizes; s++) {
            size_t bytes = sizes[s];
            int count = (int)(bytes / sizeof(double));
            if (c == GATHERV) {
                int at = 0;
                for (int r = 0; r < n; r++) { at += 1; rd[r] = at; rc[r] = count; at += count; }
            } else if (c == ALLTOALLV) {
                int per = count / n;
                for (int r = 0; r < n; r++) { sc[r] = rc[r] = per; sd[r] = rd[r] = r * per; }
            }
            int right = (rank + 1) % n, left = (rank + n - 1) % n;
            int block = count / n < 1 ? 1 : count / n;
            int pairs = (int)(bytes / 16) < 1 ? 1 : (int)(bytes / 16);
            MPI_Request reqs[2];
            if (c == HALO_PERSISTENT) {
                MPI_Recv_init(rbuf, count, MPI_DOUBLE, left, 7, MPI_COMM_WORLD, &reqs[0]);
                MPI_Send_init(sbuf, count, MPI_DOUBLE, right, 7, MPI_COMM_WORLD, &reqs[1]);
            }
            int iters = iters_for(bytes, scale);
            int warm = iters / 10 < 3 ? 3 : iters / 10;
            double *t = malloc(sizeof(double) * iters), *tmax = malloc(sizeof(double) * iters);
            for (int i = -warm; i < iters; i++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                switch (c) {
                case USER:
                    MPI_Allreduce(sbuf, rbuf, count, MPI_DOUBLE, user, MPI_COMM_WORLD);
                    break;
                case GATHERV:
                    MPI_Gatherv(sbuf, count, MPI_DOUBLE, rbuf, rc, rd, MPI_DOUBLE, 0, MPI_COMM_WORLD);
                    break;
                case ALLTOALLV:
                    MPI_Alltoallv(sbuf, sc, sd, MPI_DOUBLE, rbuf, rc, rd, MPI_DOUBLE, MPI_COMM_WORLD);
                    break;
                case HALO:
                    MPI_Irecv(rbuf, count, MPI_DOUBLE, left, 7, MPI_COMM_WORLD, &reqs[0]);
                    MPI_Isend(sbuf, count, MPI_DOUBLE, right, 7, MPI_COMM_WORLD, &reqs[1]);
                    MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
                    break;
                case HALO_PERSISTENT:
                    MPI_Startall(2, reqs);
                    MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
                    break;
                case SCAN:
                    MPI_Scan(sbuf, rbuf, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
                    break;
                case RSB:
                    MPI_Reduce_scatter_block(sbuf, rbuf, block, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
                    break;
                case MAXLOC:
                    MPI_Allreduce(lin, lout, pairs, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
                    break;
                case SENDRECV:
                    MPI_Sendrecv(sbuf, count, MPI_DOUBLE, right, 5, rbuf, count, MPI_DOUBLE, left, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    break;
                case IALLREDUCE:
                    MPI_Iallreduce(sbuf, rbuf, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &reqs[0]);
                    MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
                    break;
                }
                if (i >= 0) t[i] = MPI_Wtime() - t0;
            }
            MPI_Reduce(t, tmax, iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            if (rank == 0) {
                qsort(tmax, iters, sizeof(double), cmp_double);
                double med = (iters % 2) ? tmax[iters / 2] : 0.5 * (tmax[iters / 2 - 1] + tmax[iters / 2]);
                double moved = c == GATHERV ? (double)bytes * n : (double)bytes;
                double alg = moved / med / 1e9;
                printf("%s %zu %d %.2f %.3f %.3f %d\n", names[c], bytes, n, med * 1e6, alg, alg, iters);
                fflush(stdout);
            }
            if (c == HALO_PERSISTENT) {
                MPI_Request_free(&reqs[0]);
                MPI_Request_free(&reqs[1]);
            }
            free(t); free(tmax);
        }
    }
    MPI_Op_free(&user);
    MPI_Finalize();
    return 0;
}
