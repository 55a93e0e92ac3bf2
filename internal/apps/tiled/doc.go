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
// Their entries are counter-based (a hash of the seed, the row and the
// column), so RandomTile and SPDTile generate any tile alone, bit for bit
// equal to the same part of the whole matrix: a distributed run's ranks
// generate the tiles they own and nothing else.
//
//	t := make([]float32, 64*64)
//	tiled.SPDTile(t, 64, 1024, 1, 128, 64, 64, 64) // tile (2, 1) of a
//
// # Timing
//
// TimeKernel times one kernel call on the calling goroutine and returns
// the fastest of enough repetitions; GFlops converts it to a rate.
package tiled
