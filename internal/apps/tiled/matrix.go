package tiled

import (
	"fmt"

	"github.com/pzgo/pz/internal/linalg"
)

// The test matrices are counter-based: entry (i, j) is a hash of (seed,
// i, j), not the next draw of a sequential generator, so any tile can be
// generated alone, by the rank that owns it, equal bit for bit to the
// same part of the whole matrix. Row i's entries are the splitmix64
// sequence (Steele, Lea and Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014; constants of Vigna's splitmix64.c) that
// starts from a state drawn, by splitmix64 again, for (seed, i): an entry
// costs one mix.

// golden is splitmix64's increment, 2⁶⁴/φ.
const golden = 0x9e3779b97f4a7c15

// Streams keep the generators apart: Random and SPD with the same seed
// share no entries.
const (
	randomStream = 0x52414e444f4d // "RANDOM"
	spdStream    = 0x535044       // "SPD"
)

// mix64 is splitmix64's output function.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// rowState returns the splitmix64 state before row i's first entry in
// the matrix of seed in stream.
func rowState(seed, stream uint64, i int) uint64 {
	return mix64(mix64(seed^stream) + uint64(i+1)*golden)
}

// draw returns the entry in column j of the row whose state is state:
// the top bits of one splitmix64 output, as a signed integer scaled into
// [-1, 1). Its shift and scale come from unit.
func draw(state uint64, j int, shift uint, scale float64) float64 {
	return float64(int64(mix64(state+uint64(j+1)*golden))>>shift) * scale
}

// unit returns draw's shift and scale for precision T: as many bits as
// T's significand holds (53 or 24), so every entry is exact in T and
// strictly below 1 (a float64 in [-1, 1) rounded to float32 could reach
// 1). A float32 entry is its float64 counterpart truncated to 24 bits.
func unit[T linalg.Float]() (shift uint, scale float64) {
	var z T
	if _, ok := any(z).(float32); ok {
		return 64 - 24, 0x1p-23
	}
	return 64 - 53, 0x1p-52
}

// checkTile panics, naming the fault, when the rows×cols tile at (r0, c0)
// does not lie in a matrix of order n (n < 0: unbounded) or does not fit
// in dst with the given stride.
func checkTile(fn string, dstLen, stride, n, r0, c0, rows, cols int) {
	switch {
	case rows < 0 || cols < 0 || r0 < 0 || c0 < 0:
		panic(fmt.Sprintf("tiled: %s: negative tile %d×%d at (%d, %d)", fn, rows, cols, r0, c0))
	case n >= 0 && (r0+rows > n || c0+cols > n):
		panic(fmt.Sprintf("tiled: %s: tile %d×%d at (%d, %d) outside the %d×%d matrix", fn, rows, cols, r0, c0, n, n))
	case rows > 0 && cols > 0 && (stride < cols || dstLen < (rows-1)*stride+cols):
		panic(fmt.Sprintf("tiled: %s: %d×%d tile in %d values with stride %d", fn, rows, cols, dstLen, stride))
	}
}

// Random returns a rows×cols row-major matrix of entries uniform in
// [-1, 1), drawn from seed: entry (i, j) depends on seed, i and j only
// (RandomTile), not on the matrix's shape.
func Random[T linalg.Float](rows, cols int, seed uint64) []T {
	a := make([]T, rows*cols)
	RandomTile(a, cols, seed, 0, 0, rows, cols)
	return a
}

// RandomTile writes the rows×cols tile at row r0, column c0 of the
// seed's Random matrix into dst, row i at dst[i*stride:]: the values
// Random would hold there, bit for bit, for any matrix that contains the
// tile. It touches nothing else in dst, allocates nothing and costs a
// few nanoseconds an entry. It panics if the tile has a negative size or
// corner, or does not fit in dst.
func RandomTile[T linalg.Float](dst []T, stride int, seed uint64, r0, c0, rows, cols int) {
	checkTile("RandomTile", len(dst), stride, -1, r0, c0, rows, cols)
	shift, scale := unit[T]()
	for i := range rows {
		st := rowState(seed, randomStream, r0+i)
		row := dst[i*stride : i*stride+cols]
		for j := range row {
			row[j] = T(draw(st, c0+j, shift, scale))
		}
	}
}

// SPD returns an n×n symmetric positive definite row-major matrix: off
// the diagonal, entries uniform in [-1, 1) drawn from seed (mirrored);
// on the diagonal, n plus such an entry. It is strictly diagonally
// dominant with a positive diagonal, hence SPD (Gershgorin), and its
// condition number is small, so a factorization's residual measures the
// kernels, not the matrix. Any tile of it can be generated alone
// (SPDTile).
func SPD[T linalg.Float](n int, seed uint64) []T {
	a := make([]T, n*n)
	SPDTile(a, n, n, seed, 0, 0, n, n)
	return a
}

// SPDTile writes the rows×cols tile at row r0, column c0 of the seed's
// n×n SPD matrix into dst, row i at dst[i*stride:]: the values SPD(n,
// seed) holds there, bit for bit, for any tile (below, on or across the
// diagonal). Entry (i, j) off the diagonal is drawn for (max(i, j),
// min(i, j)), so the matrix is symmetric. It touches nothing else in dst
// and costs a few nanoseconds an entry; a tile that reaches above the
// diagonal allocates one state per column. It panics if the tile has a
// negative size or corner, lies outside the matrix or does not fit in
// dst.
func SPDTile[T linalg.Float](dst []T, stride, n int, seed uint64, r0, c0, rows, cols int) {
	checkTile("SPDTile", len(dst), stride, n, r0, c0, rows, cols)
	shift, scale := unit[T]()
	// Entries above the diagonal are drawn from their column's row state.
	var colState []uint64
	if c0+cols-1 > r0 {
		colState = make([]uint64, cols)
		for j := range colState {
			colState[j] = rowState(seed, spdStream, c0+j)
		}
	}
	for i := range rows {
		gi := r0 + i
		st := rowState(seed, spdStream, gi)
		row := dst[i*stride : i*stride+cols]
		for j := range row {
			switch gj := c0 + j; {
			case gj < gi:
				row[j] = T(draw(st, gj, shift, scale))
			case gj > gi:
				row[j] = T(draw(colState[j], gi, shift, scale))
			default:
				row[j] = T(float64(n) + draw(st, gi, shift, scale))
			}
		}
	}
}
