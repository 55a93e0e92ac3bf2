// Package cholesky is pz's tiled Cholesky factorization app and
// benchmark, `pzrun cholesky -n N -b B [--precision 32|64] [--check]`.
//
// # What it does
//
// Run generates a seeded SPD matrix (tiled.SPD), cuts it into B×B tiles
// and submits, step by step, the POTRF, TRSM, SYRK and GEMM tile tasks of
// the right-looking algorithm — the order and priorities of StarPU's
// cholesky_implicit — with R and RW accesses, so that the scheduler infers
// every dependency. The kernels come from internal/linalg: gonum by
// default, OpenBLAS with the build tag cblas.
//
//	res, err := cholesky.Run(ctx, cholesky.Options{N: 4096, Block: 256, Precision: 32, Check: true}, os.Stderr)
//	fmt.Println(res) // GFLOP/s, efficiency, residual
//
// # Figures
//
// GFLOP/s is N³/3 over the time from the first submission to the last
// task's end. Parallel efficiency divides it by workers × one worker's
// sequential rate, which Run measures in the same process: each kernel's
// fastest time on a B×B tile, weighted by the number of tasks of each kind.
// With Check, the residual ‖A − L·Lᵀ‖_F / ‖A‖_F is computed in float64
// (Residual) and should stay below Tolerance. Result's JSON field names
// are a stable interface for `pzrun cholesky --json`.
//
// Factor is the factorization alone, on a caller's scheduler and matrix,
// for programs that embed it.
package cholesky
