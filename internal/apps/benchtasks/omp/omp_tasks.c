/* The OpenMP peer of pz's `bench tasks`: the cost per task of OpenMP tasks
 * (libgomp) on the same three graphs as benchtasks' overhead cases.
 *
 *   indep    N tasks without dependencies, each an atomic increment of one
 *            counter (pz's codelet does the same), then taskwait;
 *   chain    N tasks with depend(inout: v[0]), each incrementing v[0]: a
 *            chain on one variable (pz: RW on one handle);
 *   handles4 N tasks with depend(inout: v[0], v[1], v[2], v[3]), each
 *            incrementing the four: a chain with four dependencies per
 *            task (pz: RW on the same four handles).
 *
 * One thread creates every task inside `parallel` + `single`; the team has
 * OMP_NUM_THREADS threads, the creator among them. A round is timed from
 * before the parallel region to after the taskwait, divided by N. After a
 * warm-up round of N/10 tasks, -r rounds are timed; the median and the
 * minimum are printed as
 *
 *   omp_<case> <median> us/task
 *   omp_<case>_min <min> us/task
 *   omp_threads <threads> threads
 *
 * Every round checks its counters: a lost or repeated task exits with 1.
 * Build: cc -O2 -fopenmp omp_tasks.c -o omp_tasks
 * Run:   OMP_NUM_THREADS=2 ./omp_tasks -m chain -n 100000 -r 7 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* round runs n tasks of the given case and returns µs per task, or -1 if a
 * counter is wrong. */
static double round_us(const char *mode, long n) {
	long v[4] = {0, 0, 0, 0};
	long count = 0;
	int m = !strcmp(mode, "indep") ? 0 : !strcmp(mode, "chain") ? 1 : 2;
	double t0 = omp_get_wtime();
#pragma omp parallel shared(v, count)
#pragma omp single
	{
		for (long i = 0; i < n; i++) {
			if (m == 0) {
#pragma omp task shared(count)
				{
#pragma omp atomic
					count++;
				}
			} else if (m == 1) {
#pragma omp task shared(v) depend(inout : v[0])
				v[0]++;
			} else {
#pragma omp task shared(v) depend(inout : v[0], v[1], v[2], v[3])
				{
					v[0]++;
					v[1]++;
					v[2]++;
					v[3]++;
				}
			}
		}
#pragma omp taskwait
	}
	double t = omp_get_wtime() - t0;
	int ok = m == 0 ? count == n : m == 1 ? v[0] == n : (v[0] == n && v[1] == n && v[2] == n && v[3] == n);
	if (!ok) {
		fprintf(stderr, "omp_tasks: %s: a task was lost or ran twice\n", mode);
		return -1;
	}
	return t * 1e6 / (double)n;
}

int main(int argc, char **argv) {
	long n = 100000;
	int r = 7;
	const char *mode = "indep";
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-n")) n = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-r")) r = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-m")) mode = argv[i + 1];
	}
	if (strcmp(mode, "indep") && strcmp(mode, "chain") && strcmp(mode, "handles4")) {
		fprintf(stderr, "omp_tasks: unknown case %s (indep, chain, handles4)\n", mode);
		return 2;
	}
	if (n < 10 || r < 1) {
		fprintf(stderr, "omp_tasks: -n must be at least 10 and -r at least 1\n");
		return 2;
	}
	double *t = malloc(sizeof(double) * (size_t)r);
	if (t == NULL || round_us(mode, n / 10) < 0) return 1; /* warm-up: starts the thread team */
	for (int i = 0; i < r; i++)
		if ((t[i] = round_us(mode, n)) < 0) return 1;
	qsort(t, (size_t)r, sizeof(double), cmp_double);
	printf("omp_%s %.4f us/task\nomp_%s_min %.4f us/task\nomp_threads %d threads\n", mode, t[r / 2], mode, t[0],
	       omp_get_max_threads());
	free(t);
	return 0;
}
