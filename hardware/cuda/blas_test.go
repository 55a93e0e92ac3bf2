package cuda_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
)

func TestOpenLibrariesMissing(t *testing.T) {
	_, err := cuda.OpenBLAS("/nonexistent/libcublas.so.12")
	require.ErrorIs(t, err, cuda.ErrNoLibrary)
	_, err = cuda.OpenSolver("/nonexistent/libcusolver.so.11")
	require.ErrorIs(t, err, cuda.ErrNoLibrary)
	// Another library is not cuBLAS: the missing symbol is named.
	_, err = cuda.OpenBLAS("libc.so.6")
	require.ErrorIs(t, err, cuda.ErrNoLibrary)
	require.Contains(t, err.Error(), "cublasCreate_v2")
}

// TestBLASCalls runs each binding once on the stand-in library against
// a reference computed here, column-major as cuBLAS is.
func TestBLASCalls(t *testing.T) {
	ctx := context.Background()
	d, lib := fakecuda.Open(t, 1, 16<<20)
	c, err := d.NewContext(ctx, 0)
	require.NoError(t, err)
	defer c.Close()
	s, err := c.NewStream(ctx)
	require.NoError(t, err)
	b, err := cuda.OpenBLAS(lib)
	require.NoError(t, err)
	sv, err := cuda.OpenSolver(lib)
	require.NoError(t, err)
	bh, err := b.NewHandle(ctx, c, s)
	require.NoError(t, err)
	sh, err := sv.NewHandle(ctx, c, s)
	require.NoError(t, err)

	put := func(x []float64) cuda.DevicePtr {
		p, err := c.Alloc(ctx, 8*len(x))
		require.NoError(t, err)
		require.NoError(t, c.CopyHtoD(ctx, p, cuda.Bytes(x)))
		return p
	}
	get := func(p cuda.DevicePtr, n int) []float64 {
		require.NoError(t, s.Synchronize(ctx))
		x := make([]float64, n)
		require.NoError(t, c.CopyDtoH(ctx, cuda.Bytes(x), p))
		return x
	}

	// Gemm: C (2x2) := 1·Aᵀ·B + 0·C with A 3x2, B 3x2 column-major.
	a := []float64{1, 2, 3, 4, 5, 6} // columns (1,2,3), (4,5,6)
	bm := []float64{1, 0, 1, 0, 1, 0}
	pa, pb, pc := put(a), put(bm), put(make([]float64, 4))
	require.NoError(t, cuda.Gemm[float64](bh, true, false, 2, 2, 3, 1, pa, 3, pb, 3, 0, pc, 2))
	require.Equal(t, []float64{4, 10, 2, 5}, get(pc, 4))

	// Potrf, upper: A = UᵀU for A = [[4, 2], [2, 5]] gives U = [[2, 1], [0, 2]].
	spd := put([]float64{4, 2, 2, 5})
	lw, err := cuda.PotrfWorkspace[float64](sh, true, 2, spd, 2)
	require.NoError(t, err)
	work, info := put(make([]float64, max(lw, 1))), put(make([]float64, 1))
	require.NoError(t, cuda.Potrf[float64](sh, true, 2, spd, 2, work, lw, info))
	u := get(spd, 4)
	require.Equal(t, []float64{2, 2, 1, 2}, u, "upper triangle U, the strict lower one untouched") // column-major: U00, (lower untouched 2), U01, U11

	// Trsm: solve Uᵀ·X = B for X, B = Uᵀ·[1 1]ᵀ = [2, 3]ᵀ.
	pu := put([]float64{2, 0, 1, 2})
	px := put([]float64{2, 3})
	require.NoError(t, cuda.Trsm[float64](bh, false, true, true, 2, 1, 1, pu, 2, px, 2))
	require.Equal(t, []float64{1, 1}, get(px, 2))

	// Syrk, upper: C := C − Aᵀ·A with A 1x2 = [1 2]: C -= [[1 2], [2 4]].
	p1 := put([]float64{1, 2})
	pcs := put([]float64{10, -7, 10, 10})
	require.NoError(t, cuda.Syrk[float64](bh, true, true, 2, 1, -1, p1, 1, 1, pcs, 2))
	require.Equal(t, []float64{9, -7, 8, 6}, get(pcs, 4), "the strict lower triangle untouched")

	// A status other than success names the call.
	err = cuda.Gemm[float64](bh, false, false, -1, 2, 2, 1, pa, 3, pb, 3, 0, pc, 2)
	var st *cuda.LibraryStatus
	require.True(t, errors.As(err, &st), "%v", err)
	require.Equal(t, "cublasDgemm_v2", st.Call)
	require.Contains(t, err.Error(), "CUBLAS_STATUS_INVALID_VALUE")

	require.NoError(t, bh.Destroy(ctx))
	require.NoError(t, sh.Destroy(ctx))
}
