package scheduler_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newSched(t *testing.T, opts ...scheduler.Option) *scheduler.Scheduler {
	t.Helper()
	opts = append([]scheduler.Option{scheduler.WithPerfModelDir(t.TempDir()), scheduler.WithGetenv(func(string) string { return "" })}, opts...)
	s, err := scheduler.New(testCtx(t), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Tile kernels for a tiled Cholesky factorization (lower, row-major).
func potrf(c *scheduler.Call) error {
	a := scheduler.MatrixOf[float64](c, 0)
	for j := 0; j < a.Rows; j++ {
		d := a.At(j, j)
		for k := 0; k < j; k++ {
			d -= a.At(j, k) * a.At(j, k)
		}
		if d <= 0 {
			return fmt.Errorf("matrix not positive definite at %d", j)
		}
		d = math.Sqrt(d)
		a.Set(j, j, d)
		for i := j + 1; i < a.Rows; i++ {
			v := a.At(i, j)
			for k := 0; k < j; k++ {
				v -= a.At(i, k) * a.At(j, k)
			}
			a.Set(i, j, v/d)
		}
		for k := j + 1; k < a.Cols; k++ {
			a.Set(j, k, 0)
		}
	}
	return nil
}

// trsm: B := B * L^-T where L is tile 0 (lower), B tile 1.
func trsm(c *scheduler.Call) error {
	l := scheduler.MatrixOf[float64](c, 0)
	b := scheduler.MatrixOf[float64](c, 1)
	for i := 0; i < b.Rows; i++ {
		for j := 0; j < b.Cols; j++ {
			v := b.At(i, j)
			for k := 0; k < j; k++ {
				v -= b.At(i, k) * l.At(j, k)
			}
			b.Set(i, j, v/l.At(j, j))
		}
	}
	return nil
}

// gemmNT: C -= A * B^T.
func gemmNT(c *scheduler.Call) error {
	a := scheduler.MatrixOf[float64](c, 0)
	b := scheduler.MatrixOf[float64](c, 1)
	cc := scheduler.MatrixOf[float64](c, 2)
	for i := 0; i < cc.Rows; i++ {
		for j := 0; j < cc.Cols; j++ {
			v := cc.At(i, j)
			for k := 0; k < a.Cols; k++ {
				v -= a.At(i, k) * b.At(j, k)
			}
			cc.Set(i, j, v)
		}
	}
	return nil
}

var (
	clPotrf = &scheduler.Codelet{Name: "potrf", CPU: potrf, Model: scheduler.HistoryModel("test_potrf")}
	clTrsm  = &scheduler.Codelet{Name: "trsm", CPU: trsm, Model: scheduler.HistoryModel("test_trsm")}
	clGemm  = &scheduler.Codelet{Name: "gemm", CPU: gemmNT, Model: scheduler.HistoryModel("test_gemm")}
)

// spd returns a random symmetric positive definite n x n matrix.
func spd(n int, seed uint64) []float64 {
	r := rand.New(rand.NewPCG(seed, 1))
	a := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j <= i; j++ {
			v := r.Float64() - 0.5
			a[i*n+j], a[j*n+i] = v, v
		}
		a[i*n+i] += float64(n)
	}
	return a
}

// cholesky submits the tiled right-looking Cholesky of the n x n matrix
// in data with tile size b.
func cholesky(ctx context.Context, s *scheduler.Scheduler, data []float64, n, b int) error {
	h, err := s.RegisterMatrix(data, n, n)
	if err != nil {
		return err
	}
	tiles, err := h.Partition(scheduler.Blocks(b, b))
	if err != nil {
		return err
	}
	nt := len(tiles)
	for k := 0; k < nt; k++ {
		if err := s.Submit(ctx, clPotrf, scheduler.RW(tiles[k][k]), scheduler.WithPriority(2)); err != nil {
			return err
		}
		for i := k + 1; i < nt; i++ {
			if err := s.Submit(ctx, clTrsm, scheduler.R(tiles[k][k]), scheduler.RW(tiles[i][k]), scheduler.WithPriority(1)); err != nil {
				return err
			}
		}
		for i := k + 1; i < nt; i++ {
			for j := k + 1; j <= i; j++ {
				if err := s.Submit(ctx, clGemm, scheduler.R(tiles[i][k]), scheduler.R(tiles[j][k]), scheduler.RW(tiles[i][j])); err != nil {
					return err
				}
			}
		}
	}
	if err := h.Unpartition(); err != nil {
		return err
	}
	_, err = h.Unregister(ctx)
	return err
}

// checkCholesky verifies L*L^T == A on the lower triangle.
func checkCholesky(t *testing.T, a, l []float64, n int) {
	t.Helper()
	worst := 0.0
	for i := 0; i < n; i++ {
		for j := 0; j <= i; j++ {
			v := 0.0
			for k := 0; k <= j; k++ {
				v += l[i*n+k] * l[j*n+k]
			}
			worst = max(worst, math.Abs(v-a[i*n+j]))
		}
	}
	require.Less(t, worst, 1e-9*float64(n), "max |LL^T - A|")
}

func TestPoliciesCholesky(t *testing.T) {
	for _, p := range scheduler.Policies() {
		t.Run(p, func(t *testing.T) {
			ctx := testCtx(t)
			s := newSched(t, scheduler.WithPolicy(p), scheduler.WithWorkers(3))
			require.Equal(t, p, s.Policy())
			const n, b = 96, 16
			// Twice, so dmda runs calibrated the second time.
			for round := 0; round < 2; round++ {
				a := spd(n, uint64(round))
				l := append([]float64(nil), a...)
				require.NoError(t, cholesky(ctx, s, l, n, b))
				require.NoError(t, s.WaitAll(ctx))
				checkCholesky(t, a, l, n)
			}
		})
	}
}

func TestUnknownPolicy(t *testing.T) {
	_, err := scheduler.New(testCtx(t), scheduler.WithPolicy("fastest"))
	require.ErrorIs(t, err, scheduler.ErrUnknownPolicy)
	for _, p := range []string{"eager", "prio", "random", "ws", "lws", "dmda"} {
		require.Contains(t, err.Error(), p)
	}
	_, err = scheduler.New(testCtx(t), scheduler.WithGetenv(func(k string) string {
		if k == "PZ_SCHED" {
			return "nope"
		}
		return ""
	}))
	require.ErrorIs(t, err, scheduler.ErrUnknownPolicy)
	require.Contains(t, err.Error(), `"nope"`)
}
