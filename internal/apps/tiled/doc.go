// Package tiled holds what the tiled linear-algebra apps (cholesky, gemm)
// share: option checks, seeded test matrices and the timing of one
// sequential tile kernel, from which the apps derive parallel efficiency.
//
// # Matrices
//
// Random and SPD return row-major matrices drawn from a seed, so every
// run of an app with the same options factors the same matrix:
//
//	a := tiled.SPD[float32](1024, 1)
//
// # Timing
//
// TimeKernel times one kernel call on the calling goroutine and returns
// the fastest of enough repetitions; GFlops converts it to a rate.
package tiled
