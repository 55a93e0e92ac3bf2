package tiled

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/internal/linalg"
)

func TestCheckShape(t *testing.T) {
	cases := []struct {
		n, b, p int
		ok      bool
	}{
		{256, 64, 32, true}, {256, 256, 64, true}, {0, 1, 32, false}, {256, 0, 32, false},
		{256, 512, 32, false}, {250, 64, 32, false}, {256, 64, 16, false},
	}
	for i, c := range cases {
		err := CheckShape(c.n, c.b, c.p)
		if c.ok {
			assert.NoError(t, err, "case %d", i)
		} else {
			assert.True(t, errors.Is(err, ErrBadOptions), "case %d: %v", i, err)
		}
	}
}

func TestSPDFactors(t *testing.T) {
	for _, n := range []int{1, 7, 100} {
		a := SPD[float64](n, 3)
		for i := range n {
			for j := range n {
				require.Equal(t, a[i*n+j], a[j*n+i], "symmetric")
			}
		}
		assert.NoError(t, linalg.Potrf(n, a, n), "n=%d", n)
	}
	assert.Equal(t, SPD[float32](50, 9), SPD[float32](50, 9), "same seed, same matrix")
	assert.NotEqual(t, SPD[float32](50, 9), SPD[float32](50, 10), "other seed, other matrix")
}

func TestRandomRange(t *testing.T) {
	a := Random[float32](30, 40, 1)
	require.Len(t, a, 1200)
	for _, v := range a {
		require.True(t, v >= -1 && v < 1, "%v out of range", v)
	}
}

func TestTimeKernel(t *testing.T) {
	calls, preps := 0, 0
	d := TimeKernel(5, 0, func() { preps++ }, func() { calls++; time.Sleep(time.Millisecond) })
	assert.Equal(t, 5, calls)
	assert.Equal(t, 5, preps)
	assert.GreaterOrEqual(t, d, time.Millisecond)
	assert.InDelta(t, 2.0, GFlops(2e9, time.Second), 1e-12)
}

func TestPrepareGrid(t *testing.T) {
	p, q := 0, 0
	require.NoError(t, PrepareGrid(6, &p, &q))
	assert.Equal(t, 6, p*q)
	p, q = 2, 2
	assert.ErrorIs(t, PrepareGrid(3, &p, &q), ErrBadOptions, "a 2x2 grid on 3 ranks")
	p, q = 1, 3
	assert.NoError(t, PrepareGrid(3, &p, &q))
}

// CheckMemory refuses, naming both sizes, a run that needs more than is
// available, and one no process could allocate when the memory is
// unknown; MatrixBytes does not overflow for an absurd order.
func TestCheckMemory(t *testing.T) {
	huge := 3 * MatrixBytes(10_000_000, 32) // 1.2e15 bytes
	assert.InDelta(t, 1.2e15, huge, 1)
	err := CheckMemory(huge, "3 matrices", 16<<30)
	require.ErrorIs(t, err, ErrBadOptions)
	assert.Contains(t, err.Error(), "needs at least 1.1 PiB of memory (3 matrices), more than the 16.0 GiB available here")
	err = CheckMemory(huge, "3 matrices", 0)
	require.ErrorIs(t, err, ErrBadOptions, "unknown memory: still beyond any process")
	assert.Contains(t, err.Error(), "more than a process can address")
	assert.NoError(t, CheckMemory(MatrixBytes(1024, 64), "one matrix", 16<<30))
	assert.NoError(t, CheckMemory(MatrixBytes(1024, 64), "one matrix", 0))
	assert.Equal(t, "8.0 MiB", FormatBytes(MatrixBytes(1024, 64)))
	assert.Equal(t, "512 B", FormatBytes(512))
}

// AvailableMemory reads this machine's memory: some, and no more than
// it has.
func TestAvailableMemory(t *testing.T) {
	assert.Positive(t, AvailableMemory(context.Background()))
}
