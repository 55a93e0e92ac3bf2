package cholesky

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pzgo/pz/internal/apps/tiled"
	"github.com/pzgo/pz/internal/linalg"
	"github.com/pzgo/pz/scheduler"
)

// BenchmarkCholesky factors the seeded SPD matrix at the peer's sizes
// (StarPU cholesky_implicit, N = 2048 and 4096, tile 256, single
// precision) with lws and dmda, in both layouts, reporting GFLOP/s as
// N³/3 over the submission-to-completion time of each factorization. One
// untimed factorization first calibrates dmda's models.
//
//	go test -tags cblas -run '^$' -bench Cholesky -benchtime 5x ./internal/apps/cholesky/
func BenchmarkCholesky(b *testing.B) {
	for _, n := range []int{2048, 4096} {
		for _, pol := range []string{"lws", "dmda"} {
			for _, matrix := range []bool{false, true} {
				b.Run(fmt.Sprintf("n=%d/b=256/fp32/%s/%s", n, pol, layoutName(matrix)), func(b *testing.B) { benchFactor[float32](b, n, 256, pol, matrix) })
			}
		}
	}
}

func benchFactor[T linalg.Float](b *testing.B, n, bs int, pol string, matrix bool) {
	ctx := context.Background()
	s, err := scheduler.New(ctx, scheduler.WithPolicy(pol), scheduler.WithPerfModelDir(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	a0 := tiled.SPD[T](n, 1)
	a := make([]T, len(a0))
	cl := newCodelets[T]()
	factor := func() time.Duration {
		var d time.Duration
		var err error
		if matrix {
			copy(a, a0)
			d, err = Factor(ctx, s, cl, a, n, bs, nil)
		} else {
			d, err = FactorTiles(ctx, s, cl, ToTiles(a0, n, bs), nil)
		}
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	factor()
	var total float64
	for b.Loop() {
		b.StopTimer()
		d := factor()
		b.StartTimer()
		total += d.Seconds()
	}
	b.ReportMetric(linalg.CholeskyFlops(n)*float64(b.N)/total/1e9, "GFLOP/s")
}
