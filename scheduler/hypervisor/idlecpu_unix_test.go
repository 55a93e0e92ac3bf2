//go:build unix

package hypervisor_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/hypervisor"
)

// cpuTime returns the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIdleCPU measures the CPU a finished program uses while it
// waits with its hypervisor open (user trial: two contexts of two
// workers whose declared TotalFlops were not all done): cpu-ms/s is
// the CPU time per second of wall time, after the tasks completed.
// "none" is the scheduler without a hypervisor.
//
//	go test -run '^$' -bench IdleCPU -benchtime 2x ./scheduler/hypervisor
func BenchmarkIdleCPU(b *testing.B) {
	for _, pol := range append([]string{"none"}, hypervisor.Policies()...) {
		b.Run(pol, func(b *testing.B) {
			ctx := context.Background()
			s, err := scheduler.New(ctx, scheduler.WithWorkers(4), scheduler.WithPerfModelDir(""), scheduler.WithGetenv(noEnv))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var ctxs []*scheduler.Context
			for i, name := range []string{"a", "b"} {
				c, err := s.NewContext(name, scheduler.ContextWorkers(2*i, 2*i+1))
				if err != nil {
					b.Fatal(err)
				}
				ctxs = append(ctxs, c)
			}
			if pol != "none" {
				hv, err := hypervisor.New(s, hypervisor.WithPolicyName(pol), hypervisor.WithGetenv(noEnv))
				if err != nil {
					b.Fatal(err)
				}
				defer hv.Close()
				for _, c := range ctxs {
					if err := hv.Register(c, hypervisor.Limits{TotalFlops: 1e12}); err != nil {
						b.Fatal(err)
					}
				}
			}
			cl := work("w", 100*time.Microsecond, 1e6)
			for _, c := range ctxs {
				for range 20 {
					if err := s.Submit(ctx, cl, scheduler.InContext(c)); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := s.WaitAll(ctx); err != nil {
				b.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // past the last window
			b.ResetTimer()
			var cpu, wall time.Duration
			for range b.N {
				c0, t0 := cpuTime(b), time.Now()
				time.Sleep(500 * time.Millisecond)
				cpu += cpuTime(b) - c0
				wall += time.Since(t0)
			}
			b.ReportMetric(float64(cpu)/float64(time.Millisecond)/wall.Seconds(), "cpu-ms/s")
		})
	}
}
