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

extern void strtri_(const char *uplo, const char *diag, const int *n, float *a, const int *lda, int *info, size_t uplo_len, size_t diag_len);
extern void dtrtri_(const char *uplo, const char *diag, const int *n, double *a, const int *lda, int *info, size_t uplo_len, size_t diag_len);

// PZ_TRSM is A := A·L⁻ᵀ (row-major; A m×n, L n×n lower, non-unit), which
// OpenBLAS 0.3.21's xTRSM runs at 40% of its xGEMM's speed on a 256-tile
// (20 against 50 GFLOP/s in double on this project's test machine, and
// worse for narrow L: 2 GFLOP/s at n = 16). Recursively, X = [X1 X2] with
// X1 = A1·L11⁻ᵀ and X2 = (A2 − X1·L21ᵀ)·L22⁻ᵀ: the update is one GEMM, and
// at PZ_TRSM_BASE columns or fewer the block of L is inverted (xTRTRI on a
// copy of its lower triangle, the tile's upper one is never read) and
// applied with xTRMM, as MAGMA and cuBLAS do for their TRSMs; 38 GFLOP/s
// for the 256-tile, residuals of the same order as xTRSM's. A singular
// block (xTRTRI's info > 0) goes to xTRSM, whose infinities it keeps.
#define PZ_TRSM_BASE 32
#define PZ_TRSM(name, T, trtri, trmm, trsm, gemm) \
static void name(int m, int n, const T *l, int ldl, T *a, int lda) { \
	if (n <= PZ_TRSM_BASE) { \
		T w[PZ_TRSM_BASE * PZ_TRSM_BASE]; \
		for (int r = 0; r < n; r++) \
			for (int c = 0; c < n; c++) w[r * n + c] = c <= r ? l[(size_t)r * ldl + c] : 0; \
		int info = 0; \
		trtri("U", "N", &n, w, &n, &info, 1, 1); \
		if (info != 0) { \
			trsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, m, n, 1, l, ldl, a, lda); \
			return; \
		} \
		trmm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, m, n, 1, w, n, a, lda); \
		return; \
	} \
	int n1 = n / 2, n2 = n - n1; \
	name(m, n1, l, ldl, a, lda); \
	gemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n2, n1, -1, a, lda, l + (size_t)n1 * ldl, ldl, 1, a + n1, lda); \
	name(m, n2, l + (size_t)n1 * ldl + n1, ldl, a + n1, lda); \
}
PZ_TRSM(pz_strsm, float, strtri_, cblas_strmm, cblas_strsm, cblas_sgemm)
PZ_TRSM(pz_dtrsm, double, dtrtri_, cblas_dtrmm, cblas_dtrsm, cblas_dgemm)
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
	C.pz_strsm(C.int(m), C.int(n), (*C.float)(&l[0]), C.int(ldl), (*C.float)(&a[0]), C.int(lda))
}

func trsm64(m, n int, l []float64, ldl int, a []float64, lda int) {
	C.pz_dtrsm(C.int(m), C.int(n), (*C.double)(&l[0]), C.int(ldl), (*C.double)(&a[0]), C.int(lda))
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
