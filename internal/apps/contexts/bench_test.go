package contexts_test

import (
	"context"
	"testing"

	"github.com/pzgo/pz/internal/apps/contexts"
)

// BenchmarkContexts runs the demo at the default sizes and reports each
// makespan and the hypervisor's gain over the static split
// (gain_vs_static, above 1 when the hypervisor is faster).
func BenchmarkContexts(b *testing.B) {
	for i := 0; i < b.N; i++ {
		res, err := contexts.Run(context.Background(), contexts.Options{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(res.Global.Makespan, "global-s")
		b.ReportMetric(res.Static.Makespan, "static-s")
		b.ReportMetric(res.Hypervisor.Makespan, "hypervisor-s")
		b.ReportMetric(res.GainVsStatic, "gain_vs_static")
	}
}
