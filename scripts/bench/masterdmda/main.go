// Command masterdmda times dmda on a transfer-heavy master/worker graph
// (docs/performance.md, "Master/worker mode: dmda and the worker ranks'
// links"): 320 tasks, each touching one of 32 vectors of -mb MiB (10
// rounds), submitted on rank 0 with the dmda policy, against the same
// graph kept on the master's own cores (-local). It prints the time and
// how many tasks each rank ran. Run it twice: the first run calibrates
// the codelet's model.
//
//	go build -o /tmp/masterdmda ./scripts/bench/masterdmda
//	PZ_RANKS=3 /tmp/masterdmda; PZ_RANKS=3 /tmp/masterdmda -local
//	go build -tags mpi -o /tmp/masterdmda-mpi ./scripts/bench/masterdmda
//	mpirun --oversubscribe -n 3 /tmp/masterdmda-mpi
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

func main() {
	localOnly := flag.Bool("local", false, "run every task on the master's own cores")
	mb := flag.Int("mb", 4, "MiB per vector")
	flag.Parse()
	if *mb < 1 {
		fmt.Fprintln(os.Stderr, "masterdmda: -mb must be at least 1")
		os.Exit(2)
	}
	touch := &scheduler.Codelet{Name: "touch", Model: scheduler.HistoryModel("masterdmda-touch"), CPU: func(c *scheduler.Call) error {
		x := scheduler.VectorOf[float64](c, 0)
		for i := 0; i < len(x); i += 4096 {
			x[i]++
		}
		return nil
	}}
	err := runtimeview.Run(context.Background(), 0, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		reg, err := dist.NewRegistry(touch)
		if err != nil {
			return err
		}
		return rt.RunMaster(ctx, 0, reg, func(ctx context.Context, m *dist.Master) error {
			return run(ctx, rt, m, touch, *localOnly, *mb)
		}, scheduler.WithPolicy("dmda"))
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "masterdmda:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, rt *runtimeview.RuntimeView, m *dist.Master, touch *scheduler.Codelet, localOnly bool, mb int) error {
	s := m.Local()
	var opts []scheduler.Arg
	if localOnly {
		var ws []int
		for w := range m.Workers() {
			if m.RankOf(w) == 0 {
				ws = append(ws, w)
			}
		}
		cx, err := s.NewContext("master", scheduler.ContextWorkers(ws...))
		if err != nil {
			return err
		}
		opts = append(opts, scheduler.InContext(cx))
	}
	hs := make([]*scheduler.Handle, 32)
	for i := range hs {
		h, err := s.RegisterVector(make([]float64, mb<<17))
		if err != nil {
			return err
		}
		hs[i] = h
	}
	start := time.Now()
	for range 10 {
		for _, h := range hs {
			if err := m.Submit(ctx, touch, append([]scheduler.Arg{scheduler.RW(h)}, opts...)...); err != nil {
				return err
			}
		}
	}
	if err := m.WaitAll(ctx); err != nil {
		return err
	}
	per := make([]int64, rt.Size())
	for _, w := range s.Stats() {
		per[m.RankOf(w.Worker)] += w.Tasks
	}
	fmt.Printf("local=%v: %v, tasks per rank %v\n", localOnly, time.Since(start).Round(time.Millisecond), per)
	return nil
}
