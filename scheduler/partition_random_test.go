package scheduler_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/pzgo/pz/scheduler"
)

// Random task graphs on a CPU worker and two simulated devices (one with
// two workers, one of them in a partition context) with Partition and
// Unpartition between them: RW, W, Commute and Redux tasks on the tiles
// and the whole, host Fetch, Data and Unregister, checked against a
// sequential model. Written for helper-137's device trial, it caught a
// tile's readers running beside the whole's readers on a device (the
// change that let a tile's first accesses wait for the whole's readers
// as readers, 61c9496): wrong data, WaitAll nil.

// partL is the length of a vector.
const partL = 256

func pmod(v float64) float64 { return float64(int64(v) % 1000003) }

// TestPartitionRandomGraphs runs PZ_PARTITION_SEEDS graphs (100).
func TestPartitionRandomGraphs(t *testing.T) {
	n := 100
	if v := os.Getenv("PZ_PARTITION_SEEDS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	for seed := range int64(n) {
		runPartitionRandom(t, seed)
	}
}

func runPartitionRandom(t *testing.T, seed int64) {
	fzRW := &scheduler.Codelet{Name: "rw", Model: scheduler.HistoryModel("fz-rw"), CPU: func(c *scheduler.Call) error {
		v := scheduler.VectorOf[float64](c, 0)
		k := c.Arg.(int)
		for i := range v {
			v[i] = pmod(v[i]*3 + float64(k))
		}
		return nil
	}}
	fzW := &scheduler.Codelet{Name: "w", Model: scheduler.HistoryModel("fz-w"), CPU: func(c *scheduler.Call) error {
		v := scheduler.VectorOf[float64](c, 0)
		k := c.Arg.(int)
		for i := range v {
			v[i] = float64(k + i)
		}
		return nil
	}}
	fzAdd := &scheduler.Codelet{Name: "add", Model: scheduler.HistoryModel("fz-add"), CPU: func(c *scheduler.Call) error { // R src, RW|Commute|Redux dst
		src := scheduler.VectorOf[float64](c, 0)
		d := scheduler.VectorOf[float64](c, 1)
		for i := range d {
			d[i] += pmod(src[i]) + float64(c.Arg.(int))
		}
		return nil
	}}
	fzZero := &scheduler.Codelet{Name: "zero", CPU: func(c *scheduler.Call) error {
		v := scheduler.VectorOf[float64](c, 0)
		for i := range v {
			v[i] = 0
		}
		return nil
	}}
	fzComb := &scheduler.Codelet{Name: "comb", CPU: func(c *scheduler.Call) error {
		d := scheduler.VectorOf[float64](c, 0)
		s := scheduler.VectorOf[float64](c, 1)
		for i := range d {
			d[i] += s[i]
		}
		return nil
	}}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := rand.New(rand.NewPCG(uint64(seed), 7))
	nh := 10
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPolicy([]string{"dmda", "lws", "eager"}[seed%3]), scheduler.WithPerfModelDir(""),
		scheduler.WithSimDevices(scheduler.SimDevice{Memory: 8 * partL * 8, Workers: 2}, scheduler.SimDevice{Memory: 5 * partL * 8}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var devs []int
	for _, w := range s.Workers() {
		if w.Kind != scheduler.CPUWorker {
			devs = append(devs, w.ID)
		}
	}
	dctx, _ := s.NewContext("dev", scheduler.ContextWorkers(devs...))
	part, _ := dctx.NewContext("part", scheduler.ContextWorkers(devs[0]))
	ctxs := []context.Context{ctx, scheduler.Within(ctx, dctx), scheduler.Within(ctx, part)}
	mem := make([][]float64, nh)
	model := make([][]float64, nh)
	hs := make([]*scheduler.Handle, nh)
	reg := func(i int) {
		h, err := s.RegisterVector(mem[i], scheduler.Named(fmt.Sprint("h", i)))
		if err != nil {
			t.Fatal(err)
		}
		h.SetReduction(fzZero, fzComb)
		hs[i] = h
	}
	for i := range mem {
		mem[i] = make([]float64, partL)
		model[i] = make([]float64, partL)
		for j := range mem[i] {
			mem[i][j] = float64(r.IntN(1000))
			model[i][j] = mem[i][j]
		}
		reg(i)
	}
	check := func(what string, i int, got []float64) {
		for j := range got {
			if got[j] != model[i][j] {
				t.Fatalf("seed %d: %s h%d[%d]=%v want %v (waitall: %v)", seed, what, i, j, got[j], model[i][j], s.WaitAll(ctx))
			}
		}
	}
	for step := 0; step < 300; step++ {
		c := ctxs[r.IntN(len(ctxs))]
		i, j := r.IntN(nh), r.IntN(nh)
		k := r.IntN(100)
		var err error
		op := r.IntN(12)
		switch op {
		case 0, 1:
			err = s.Submit(c, fzRW, scheduler.RW(hs[i]), scheduler.WithArg(k))
			for x := range model[i] {
				model[i][x] = pmod(model[i][x]*3 + float64(k))
			}
		case 2:
			err = s.Submit(c, fzW, scheduler.W(hs[i]), scheduler.WithArg(k))
			for x := range model[i] {
				model[i][x] = float64(k + x)
			}
		case 3, 4:
			if i == j {
				continue
			}
			err = s.Submit(c, fzAdd, scheduler.R(hs[j]), scheduler.RW(hs[i]), scheduler.WithArg(k))
			for x := range model[i] {
				model[i][x] += pmod(model[j][x]) + float64(k)
			}
		case 5, 6:
			if i == j {
				continue
			}
			err = s.Submit(c, fzAdd, scheduler.R(hs[j]), scheduler.Commute(hs[i]), scheduler.WithArg(k))
			for x := range model[i] {
				model[i][x] += pmod(model[j][x]) + float64(k)
			}
		case 7, 8:
			i = r.IntN(2)
			if i == j {
				continue
			}
			err = s.Submit(c, fzAdd, scheduler.R(hs[j]), scheduler.Redux(hs[i]), scheduler.WithArg(k))
			for x := range model[i] {
				model[i][x] += pmod(model[j][x]) + float64(k)
			}
		case 9:
			v, err2 := hs[i].Fetch(ctx)
			if err2 != nil {
				t.Fatal(err2)
			}
			check("fetch", i, v.([]float64))
		case 10:
			v := hs[i].Data().([]float64)
			check("data", i, v)
			v[k] = float64(k * 7)
			model[i][k] = float64(k * 7)
		case 11:
			if r.IntN(2) == 0 {
				v, err2 := hs[i].Unregister(ctx)
				if err2 != nil {
					t.Fatal(err2)
				}
				check("unregister", i, v.([]float64))
				reg(i)
			} else {
				// partition into 4 chunks, tasks on chunks, unpartition
				tl, err2 := hs[i].Partition(scheduler.Blocks(partL/4, 1))
				if err2 != nil {
					t.Fatal(err2)
				}
				for rep := 0; rep < 3; rep++ {
					for q := range tl {
						cc := ctxs[r.IntN(len(ctxs))]
						var err error
						switch r.IntN(4) {
						case 0:
							err = s.Submit(cc, fzRW, scheduler.RW(tl[q][0]), scheduler.WithArg(q))
							for x := q * partL / 4; x < (q+1)*partL/4; x++ {
								model[i][x] = pmod(model[i][x]*3 + float64(q))
							}
						case 1, 2:
							src := tl[(q+1)%4][0]
							m := scheduler.Redux(tl[q][0])
							if r.IntN(2) == 0 {
								m = scheduler.Commute(tl[q][0])
							}
							err = s.Submit(cc, fzAdd, scheduler.R(src), m, scheduler.WithArg(q))
							for x := q * partL / 4; x < (q+1)*partL/4; x++ {
								model[i][x] += pmod(model[i][x-q*partL/4+((q+1)%4)*partL/4]) + float64(q)
							}
						case 3:
							v, err2 := tl[q][0].Fetch(ctx)
							if err2 != nil {
								t.Fatal(err2)
							}
							for x := 0; x < partL/4; x++ {
								if v.([]float64)[x] != model[i][q*partL/4+x] {
									t.Fatalf("seed %d: tile fetch h%d[%d]=%v want %v", seed, i, q*partL/4+x, v.([]float64)[x], model[i][q*partL/4+x])
								}
							}
						}
						if err != nil {
							t.Fatal(err)
						}
					}
				}
				if err := hs[i].Unpartition(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WaitAll(ctx); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	for i := range mem {
		check("final", i, mem[i])
	}
}
