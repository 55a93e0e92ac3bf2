package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pzgo/pz/scheduler"
)

// nopMonitor is a Monitor that does nothing: it measures the cost of the
// hooks themselves.
type nopMonitor struct{}

func (nopMonitor) TaskPushed(*scheduler.Context, *scheduler.Task)                       {}
func (nopMonitor) TaskPopped(*scheduler.Context, *scheduler.Task, int)                  {}
func (nopMonitor) IdleCycle(*scheduler.Context, int, time.Duration)                     {}
func (nopMonitor) IdleEnd(*scheduler.Context, int, time.Duration)                       {}
func (nopMonitor) TaskExecuted(*scheduler.Context, *scheduler.Task, int, time.Duration) {}

// BenchmarkContextTasks measures the per-task overhead of independent
// empty tasks and of tasks chained on one handle, submitted to the
// global context with no other context (the baseline of BenchmarkTasks),
// to a context holding every worker (by InContext, and by Within), and
// with a Monitor installed.
func BenchmarkContextTasks(b *testing.B) {
	cases := []struct {
		name  string
		setup func(s *scheduler.Scheduler) (context.Context, []scheduler.Arg)
	}{
		{"global", func(s *scheduler.Scheduler) (context.Context, []scheduler.Arg) { return context.Background(), nil }},
		{"incontext", func(s *scheduler.Scheduler) (context.Context, []scheduler.Arg) {
			c, err := s.NewContext("all", scheduler.ContextSize(len(s.Workers())))
			if err != nil {
				b.Fatal(err)
			}
			return context.Background(), []scheduler.Arg{scheduler.InContext(c)}
		}},
		{"within", func(s *scheduler.Scheduler) (context.Context, []scheduler.Arg) {
			c, err := s.NewContext("all", scheduler.ContextSize(len(s.Workers())))
			if err != nil {
				b.Fatal(err)
			}
			return scheduler.Within(context.Background(), c), nil
		}},
		{"monitored", func(s *scheduler.Scheduler) (context.Context, []scheduler.Arg) {
			s.SetMonitor(nopMonitor{}, 0)
			return context.Background(), nil
		}},
	}
	for _, tc := range cases {
		for _, chain := range []bool{false, true} {
			kind := "indep"
			if chain {
				kind = "chain"
			}
			b.Run(fmt.Sprintf("%s/%s", kind, tc.name), func(b *testing.B) {
				s, err := scheduler.New(context.Background(), scheduler.WithPerfModelDir(""))
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				ctx, args := tc.setup(s)
				var v uint64
				h, _ := s.RegisterValue(&v)
				cl := clEmpty
				if chain {
					cl = clIncr
					args = append(args, scheduler.RW(h))
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := s.Submit(ctx, cl, args...); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.WaitAll(ctx); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N), "us/task")
			})
		}
	}
}
