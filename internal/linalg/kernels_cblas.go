//go:build cblas

package linalg

/*
#cgo LDFLAGS: -lopenblas
#include <cblas.h>
#include <stddef.h>

// LAPACK's Fortran entry points, exported by libopenblas (OpenBLAS ships a
// native xPOTRF). The trailing size_t is gfortran's hidden length of the
// character argument.
extern void spotrf_(const char *uplo, const int *n, float *a, const int *lda, int *info, size_t uplo_len);
extern void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info, size_t uplo_len);

// Tile kernels run one per worker: OpenBLAS must not start threads of its
// own (the Debian default libopenblas is the pthread build). This runs once
// when the program is loaded; the serial build ignores it.
static void __attribute__((constructor)) pz_openblas_serial(void) { openblas_set_num_threads(1); }

// A row-major lower Cholesky is the column-major upper one of the same
// memory: L stored by rows is Lᵀ = U stored by columns.
static int pz_spotrf(int n, float *a, int lda) {
	int info = 0;
	spotrf_("U", &n, a, &lda, &info, 1);
	return info;
}
static int pz_dpotrf(int n, double *a, int lda) {
	int info = 0;
	dpotrf_("U", &n, a, &lda, &info, 1);
	return info;
}
*/
import "C"

// Backend names the kernel implementation compiled in: "gonum" (pure Go,
// the default) or "openblas" (build tag cblas).
const Backend = "openblas"

// blasThreads returns the number of threads OpenBLAS would use for one
// call; the constructor above makes it 1.
func blasThreads() int { return int(C.openblas_get_num_threads()) }

func potrf32(n int, a []float32, lda int) bool {
	return C.pz_spotrf(C.int(n), (*C.float)(&a[0]), C.int(lda)) == 0
}

func potrf64(n int, a []float64, lda int) bool {
	return C.pz_dpotrf(C.int(n), (*C.double)(&a[0]), C.int(lda)) == 0
}

func trsm32(m, n int, l []float32, ldl int, a []float32, lda int) {
	C.cblas_strsm(C.CblasRowMajor, C.CblasRight, C.CblasLower, C.CblasTrans, C.CblasNonUnit,
		C.blasint(m), C.blasint(n), 1, (*C.float)(&l[0]), C.blasint(ldl), (*C.float)(&a[0]), C.blasint(lda))
}

func trsm64(m, n int, l []float64, ldl int, a []float64, lda int) {
	C.cblas_dtrsm(C.CblasRowMajor, C.CblasRight, C.CblasLower, C.CblasTrans, C.CblasNonUnit,
		C.blasint(m), C.blasint(n), 1, (*C.double)(&l[0]), C.blasint(ldl), (*C.double)(&a[0]), C.blasint(lda))
}

func syrk32(n, k int, a []float32, lda int, c []float32, ldc int) {
	C.cblas_ssyrk(C.CblasRowMajor, C.CblasLower, C.CblasNoTrans, C.blasint(n), C.blasint(k),
		-1, (*C.float)(&a[0]), C.blasint(lda), 1, (*C.float)(&c[0]), C.blasint(ldc))
}

func syrk64(n, k int, a []float64, lda int, c []float64, ldc int) {
	C.cblas_dsyrk(C.CblasRowMajor, C.CblasLower, C.CblasNoTrans, C.blasint(n), C.blasint(k),
		-1, (*C.double)(&a[0]), C.blasint(lda), 1, (*C.double)(&c[0]), C.blasint(ldc))
}

func gemm32(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	C.cblas_sgemm(C.CblasRowMajor, C.CblasNoTrans, C.CblasTrans, C.blasint(m), C.blasint(n), C.blasint(k),
		-1, (*C.float)(&a[0]), C.blasint(lda), (*C.float)(&b[0]), C.blasint(ldb), 1, (*C.float)(&c[0]), C.blasint(ldc))
}

func gemm64(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
	C.cblas_dgemm(C.CblasRowMajor, C.CblasNoTrans, C.CblasTrans, C.blasint(m), C.blasint(n), C.blasint(k),
		-1, (*C.double)(&a[0]), C.blasint(lda), (*C.double)(&b[0]), C.blasint(ldb), 1, (*C.double)(&c[0]), C.blasint(ldc))
}
