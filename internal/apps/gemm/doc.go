// Package gemm is pz's tiled matrix-multiplication app and benchmark,
// `pzrun gemm -n N -b B [--precision 32|64] [--check]`.
//
// Run computes C −= A·Bᵀ for seeded random N×N matrices after StarPU's
// mult example (sgemm/dgemm): A and B are cut into panels of B rows, C
// into B×B tiles, and one task per tile of C reads one panel of each, so
// the N/B² tasks are independent and the figure measures the scheduler's
// throughput on coarse tasks. GFLOP/s is 2N³ over the time from the first
// submission to the end of the last task; parallel efficiency divides it
// by workers × one task's kernel rate measured in the same run. With
// Check, sampled entries are compared with float64 dot products.
//
//	res, err := gemm.Run(ctx, gemm.Options{N: 2880, Block: 240, Check: true}, os.Stderr)
//
// Result's JSON field names are a stable interface for `pzrun gemm --json`.
package gemm
