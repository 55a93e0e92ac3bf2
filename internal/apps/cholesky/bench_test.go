package cholesky

import (
	"context"
	"fmt"
	"testing"

	"github.com/pzgo/pz/internal/apps/tiled"
	"github.com/pzgo/pz/internal/linalg"
	"github.com/pzgo/pz/scheduler"
)

// BenchmarkCholesky factors the seeded SPD matrix at the peer's sizes
// (StarPU cholesky_implicit, N = 2048 and 4096, tile 256, single
// precision) with the default policy and lws/dmda, reporting GFLOP/s as
// N³/3 over the submission-to-completion time of each factorization. One
// untimed factorization first calibrates dmda's models.
//
//	go test -tags cblas -run '^$' -bench Cholesky -benchtime 5x ./internal/apps/cholesky/
func BenchmarkCholesky(b *testing.B) {
	for _, n := range []int{2048, 4096} {
		for _, pol := range []string{"lws", "dmda"} {
			b.Run(fmt.Sprintf("n=%d/b=256/fp32/%s", n, pol), func(b *testing.B) { benchFactor[float32](b, n, 256, pol) })
		}
	}
}

func benchFactor[T linalg.Float](b *testing.B, n, bs int, pol string) {
	ctx := context.Background()
	s, err := scheduler.New(ctx, scheduler.WithPolicy(pol), scheduler.WithPerfModelDir(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	a0 := tiled.SPD[T](n, 1)
	a := make([]T, len(a0))
	cl := newCodelets[T]()
	copy(a, a0)
	if _, err := Factor(ctx, s, cl, a, n, bs, nil); err != nil {
		b.Fatal(err)
	}
	var total float64
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		copy(a, a0)
		b.StartTimer()
		d, err := Factor(ctx, s, cl, a, n, bs, nil)
		if err != nil {
			b.Fatal(err)
		}
		total += d.Seconds()
	}
	b.ReportMetric(linalg.CholeskyFlops(n)*float64(b.N)/total/1e9, "GFLOP/s")
}
