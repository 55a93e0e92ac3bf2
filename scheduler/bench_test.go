package scheduler_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pzgo/pz/scheduler"
)

var clEmpty = &scheduler.Codelet{Name: "empty", CPU: func(*scheduler.Call) error { return nil }}

var clIncr = &scheduler.Codelet{Name: "incr", CPU: func(c *scheduler.Call) error {
	*scheduler.ValueOf[*uint64](c, 0)++
	return nil
}}

var clTouch1 = &scheduler.Codelet{Name: "touch1", CPU: func(c *scheduler.Call) error {
	scheduler.VectorOf[float64](c, 0)[0]++
	return nil
}}

var clTouch4 = &scheduler.Codelet{Name: "touch4", CPU: func(c *scheduler.Call) error {
	for i := 0; i < 4; i++ {
		scheduler.VectorOf[float64](c, i)[0]++
	}
	return nil
}}

// benchSched reports microseconds per task (submission of b.N tasks,
// split among the submitters, to WaitAll) as us/task, and the process's
// CPU time per task (all workers and submitters, spinning included) as
// cpu-us/task.
func benchSched(b *testing.B, policy string, submitters int, submit func(ctx context.Context, s *scheduler.Scheduler, g, i int) error, setup func(s *scheduler.Scheduler, g int)) {
	ctx := context.Background()
	s, err := scheduler.New(ctx, scheduler.WithPolicy(policy), scheduler.WithPerfModelDir(""))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for g := 0; g < submitters; g++ {
		setup(s, g)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	var wg sync.WaitGroup
	for g := 0; g < submitters; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < b.N; i += submitters {
				if err := submit(ctx, s, g, i); err != nil {
					b.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	if err := s.WaitAll(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N), "us/task")
	b.ReportMetric(float64(processCPU()-cpu0)/1e3/float64(b.N), "cpu-us/task")
}

// BenchmarkTasks measures per-task overhead, the cases of StarPU's
// tasks_overhead: independent empty tasks, tasks chained on one RW
// handle (one chain per submitter), tasks with 4 handles each (R, R,
// RW, RW on per-submitter vectors), and handles4, RW on all four (pzrun
// bench tasks' handles4 case: a chain through four handles), for every
// policy and 1 or 2 submitting goroutines.
func BenchmarkTasks(b *testing.B) {
	for _, p := range scheduler.Policies() {
		for _, subs := range []int{1, 2} {
			b.Run(fmt.Sprintf("indep/%s/submitters=%d", p, subs), func(b *testing.B) {
				benchSched(b, p, subs, func(ctx context.Context, s *scheduler.Scheduler, g, i int) error {
					return s.Submit(ctx, clEmpty)
				}, func(*scheduler.Scheduler, int) {})
			})
			b.Run(fmt.Sprintf("chain/%s/submitters=%d", p, subs), func(b *testing.B) {
				hs := make([]*scheduler.Handle, subs)
				vals := make([]uint64, subs)
				benchSched(b, p, subs, func(ctx context.Context, s *scheduler.Scheduler, g, i int) error {
					return s.Submit(ctx, clIncr, scheduler.RW(hs[g]))
				}, func(s *scheduler.Scheduler, g int) {
					hs[g], _ = s.RegisterValue(&vals[g])
				})
			})
			b.Run(fmt.Sprintf("4handles/%s/submitters=%d", p, subs), func(b *testing.B) {
				hs := make([][4]*scheduler.Handle, subs)
				benchSched(b, p, subs, func(ctx context.Context, s *scheduler.Scheduler, g, i int) error {
					h := &hs[g]
					return s.Submit(ctx, clTouch4, scheduler.R(h[0]), scheduler.R(h[1]), scheduler.RW(h[2]), scheduler.RW(h[3]))
				}, func(s *scheduler.Scheduler, g int) {
					for k := range hs[g] {
						hs[g][k], _ = s.RegisterVector(make([]float64, 1))
					}
				})
			})
			b.Run(fmt.Sprintf("handles4/%s/submitters=%d", p, subs), func(b *testing.B) {
				hs := make([][4]*scheduler.Handle, subs)
				benchSched(b, p, subs, func(ctx context.Context, s *scheduler.Scheduler, g, i int) error {
					h := &hs[g]
					return s.Submit(ctx, clTouch4, scheduler.RW(h[0]), scheduler.RW(h[1]), scheduler.RW(h[2]), scheduler.RW(h[3]))
				}, func(s *scheduler.Scheduler, g int) {
					for k := range hs[g] {
						hs[g][k], _ = s.RegisterVector(make([]float64, 1))
					}
				})
			})
		}
	}
}

// BenchmarkSubmitWire measures the submitting goroutine alone: tasks of
// four handles (R, R, RW, RW as BenchmarkTasks/4handles, or RW on all
// four as pzrun bench tasks' handles4) are submitted in batches of 256
// behind a task that holds the four handles until the timer stops, so
// the workers stay asleep and each Submit is validation and dependency
// wiring only, on one core. Wiring is most of a submission's cost, and
// this figure is steadier on a loaded machine than BenchmarkTasks'.
func BenchmarkSubmitWire(b *testing.B) {
	for _, c := range []struct {
		name  string
		modes [4]scheduler.Mode
	}{
		{"R,R,RW,RW", [4]scheduler.Mode{scheduler.ModeR, scheduler.ModeR, scheduler.ModeRW, scheduler.ModeRW}},
		{"RWx4", [4]scheduler.Mode{scheduler.ModeRW, scheduler.ModeRW, scheduler.ModeRW, scheduler.ModeRW}},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			s, err := scheduler.New(ctx, scheduler.WithPolicy("lws"), scheduler.WithPerfModelDir(""))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var h [4]*scheduler.Handle
			for k := range h {
				h[k], _ = s.RegisterVector(make([]float64, 1))
			}
			const batch = 256
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				b.StopTimer()
				gate := make(chan struct{})
				block := &scheduler.Codelet{Name: "gate", CPU: func(*scheduler.Call) error { <-gate; return nil }}
				if err := s.Submit(ctx, block, scheduler.RW(h[0]), scheduler.RW(h[1]), scheduler.RW(h[2]), scheduler.RW(h[3])); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				for range min(batch, b.N-i) {
					if err := s.Submit(ctx, clTouch4, scheduler.Data(h[0], c.modes[0]), scheduler.Data(h[1], c.modes[1]),
						scheduler.Data(h[2], c.modes[2]), scheduler.Data(h[3], c.modes[3])); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				close(gate)
				if err := s.WaitAll(ctx); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkDriverSubmit is the submitter as a worker: independent empty
// tasks submitted through the Driver of one of 2 workers and waited for
// with its WaitAll, with the submit limit off (every task queued) and at
// its default (past it, tasks ready at once run in Submit). ns/op is
// the time per task.
//
//	go test -run '^$' -bench DriverSubmit -benchtime 1000000x ./scheduler/
func BenchmarkDriverSubmit(b *testing.B) {
	for _, pol := range []string{"lws", "eager", "dmda"} {
		for _, limit := range []string{"off", "default"} {
			b.Run(pol+"/limit="+limit, func(b *testing.B) {
				ctx := context.Background()
				s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithDrivenWorkers(1),
					scheduler.WithPolicy(pol), scheduler.WithPerfModelDir(""))
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				d, err := s.Driver(1)
				if err != nil {
					b.Fatal(err)
				}
				if err := d.Init(); err != nil {
					b.Fatal(err)
				}
				defer d.Deinit()
				if limit == "off" {
					d.SetSubmitLimit(0)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if err := d.Submit(ctx, clEmpty); err != nil {
						b.Fatal(err)
					}
				}
				if err := d.WaitAll(ctx); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// BenchmarkBatch is BenchmarkTasks' cases (4handles here: four RW
// handles, as pzrun bench tasks' handles4) under lws with one submitter,
// submitted one by one (batch=0) or through a scheduler.Batch flushed
// every batch tasks. cpu-us/task, the CPU the process spent per task, is
// steadier than the wall time where the machine's speed changes:
//
//	go test -run '^$' -bench Batch -benchtime 1000000x ./scheduler/
func BenchmarkBatch(b *testing.B) {
	for _, c := range []string{"indep", "chain", "4handles"} {
		for _, size := range []int{0, 64, 256, 1024} {
			b.Run(fmt.Sprintf("%s/batch=%d", c, size), func(b *testing.B) {
				var (
					bt   *scheduler.Batch
					n    int
					args []scheduler.Arg
					cl   = clEmpty
				)
				benchSched(b, "lws", 1, func(ctx context.Context, s *scheduler.Scheduler, g, i int) error {
					if size == 0 {
						return s.Submit(ctx, cl, args...)
					}
					err := bt.Submit(ctx, cl, args...)
					if n++; n%size == 0 {
						bt.Flush()
					}
					return err
				}, func(s *scheduler.Scheduler, g int) {
					bt = s.NewBatch()
					switch c {
					case "chain":
						h, _ := s.RegisterVector(make([]float64, 1))
						args, cl = []scheduler.Arg{scheduler.RW(h)}, clTouch1
					case "4handles":
						for range 4 {
							h, _ := s.RegisterVector(make([]float64, 1))
							args = append(args, scheduler.RW(h))
						}
						cl = clTouch4
					}
				})
			})
		}
	}
}

// BenchmarkRecursive is fib(20) split down to n < 2 by tasks that
// submit tasks, on 2 workers, as docs/scheduler.md's "Recursive tasks"
// describes: /tags joins each split with a continuation that waits for
// the children's tags (Example_recursive: 32,836 tasks per fib(20));
// /joincounter with an atomic count of children in the parent's frame,
// whose last child combines the results and completes the parent in
// its own code (21,891 tasks). One op is one fib(20); ns/task is the
// wall time per task.
//
//	go test -run '^$' -bench BenchmarkRecursive -benchtime 20x -count 5 ./scheduler/
func BenchmarkRecursive(b *testing.B) {
	const n, want = 20, 6765
	b.Run("tags", func(b *testing.B) {
		ctx := context.Background()
		s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPerfModelDir(""))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		var lastTag atomic.Uint64
		newTag := func() scheduler.Tag { return scheduler.Tag(lastTag.Add(1)) }
		type fibArg struct {
			n   int
			out *int
			tag scheduler.Tag
		}
		type sumArg struct {
			x, y, out *int
			tags      []scheduler.Tag
		}
		var tasks atomic.Int64
		sum := &scheduler.Codelet{Name: "sum", CPU: func(c *scheduler.Call) error {
			a := c.Arg.(sumArg)
			*a.out = *a.x + *a.y
			return s.RemoveTags(a.tags...)
		}}
		leaf := &scheduler.Codelet{Name: "leaf", CPU: func(c *scheduler.Call) error {
			a := c.Arg.(fibArg)
			*a.out = a.n
			return nil
		}}
		var fib *scheduler.Codelet
		spawn := func(a fibArg) error {
			tasks.Add(1)
			if a.n < 2 {
				return s.Submit(ctx, leaf, scheduler.WithArg(a), scheduler.WithTag(a.tag))
			}
			return s.Submit(ctx, fib, scheduler.WithArg(a))
		}
		fib = &scheduler.Codelet{Name: "fib", CPU: func(c *scheduler.Call) error {
			a := c.Arg.(fibArg)
			x, y := new(int), new(int)
			tx, ty := newTag(), newTag()
			if err := spawn(fibArg{a.n - 1, x, tx}); err != nil {
				return err
			}
			if err := spawn(fibArg{a.n - 2, y, ty}); err != nil {
				return err
			}
			tasks.Add(1)
			return s.Submit(ctx, sum, scheduler.WithArg(sumArg{x, y, a.out, []scheduler.Tag{tx, ty}}),
				scheduler.AfterTags(tx, ty), scheduler.WithTag(a.tag))
		}}
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			var r int
			root := newTag()
			if err := spawn(fibArg{n, &r, root}); err != nil {
				b.Fatal(err)
			}
			if err := s.WaitTag(ctx, root); err != nil {
				b.Fatal(err)
			}
			if err := s.WaitAll(ctx); err != nil {
				b.Fatal(err)
			}
			if err := s.RemoveTags(root); err != nil {
				b.Fatal(err)
			}
			if r != want {
				b.Fatalf("fib(%d) = %d, want %d", n, r, want)
			}
		}
		b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(tasks.Load()), "ns/task")
	})
	b.Run("joincounter", func(b *testing.B) {
		ctx := context.Background()
		s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithPerfModelDir(""))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		// frame is a split's join: left counts its children still
		// running; the one that brings it to zero adds their results
		// into out and completes the parent frame in turn.
		type frame struct {
			x, y   int
			out    *int
			left   atomic.Int32
			parent *frame
		}
		type fibArg struct {
			n      int
			out    *int
			parent *frame
		}
		complete := func(f *frame) {
			for f != nil && f.left.Add(-1) == 0 {
				*f.out = f.x + f.y
				f = f.parent
			}
		}
		var tasks atomic.Int64
		var fib *scheduler.Codelet
		spawn := func(a fibArg) error {
			tasks.Add(1)
			return s.Submit(ctx, fib, scheduler.WithArg(a))
		}
		fib = &scheduler.Codelet{Name: "fib", CPU: func(c *scheduler.Call) error {
			a := c.Arg.(fibArg)
			if a.n < 2 {
				*a.out = a.n
				complete(a.parent)
				return nil
			}
			f := &frame{out: a.out, parent: a.parent}
			f.left.Store(2)
			if err := spawn(fibArg{a.n - 1, &f.x, f}); err != nil {
				return err
			}
			return spawn(fibArg{a.n - 2, &f.y, f})
		}}
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			var r int
			if err := spawn(fibArg{n, &r, nil}); err != nil {
				b.Fatal(err)
			}
			if err := s.WaitAll(ctx); err != nil {
				b.Fatal(err)
			}
			if r != want {
				b.Fatalf("fib(%d) = %d, want %d", n, r, want)
			}
		}
		b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(tasks.Load()), "ns/task")
	})
}
