package linalg

// PotrfFlops returns the floating-point operation count of Potrf on an n×n
// tile (LAPACK Working Note 41: n³/3 + n²/2 + n/6).
func PotrfFlops(n int) float64 {
	f := float64(n)
	return f*f*f/3 + f*f/2 + f/6
}

// TrsmFlops returns the operation count of Trsm on an m×n tile: m·n².
func TrsmFlops(m, n int) float64 {
	return float64(m) * float64(n) * float64(n)
}

// SyrkFlops returns the operation count of Syrk for an n×k panel: n(n+1)k.
func SyrkFlops(n, k int) float64 {
	return float64(n) * float64(n+1) * float64(k)
}

// GemmFlops returns the operation count of Gemm for m×n×k: 2mnk.
func GemmFlops(m, n, k int) float64 {
	return 2 * float64(m) * float64(n) * float64(k)
}

// CholeskyFlops returns the conventional operation count of the Cholesky
// factorization of an n×n matrix, n³/3, the figure StarPU's
// cholesky_implicit example divides by to print GFLOP/s. The tile kernels'
// exact counts sum to slightly more (lower-order terms).
func CholeskyFlops(n int) float64 {
	f := float64(n)
	return f * f * f / 3
}
