package scheduler_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// A randomized sequential task flow: every task reads some handles and
// updates others with an order-sensitive formula, so any dependency the
// scheduler misses changes the results. The same list run sequentially
// in submission order gives the expected values.

type rop struct {
	h    int
	mode scheduler.Mode
}

type rtask struct {
	ops   []rop
	after []int // explicit predecessors (indices)
}

const mix = 1000003

// apply runs task i's formula on vals; out receives what it read.
func applyTask(i int, tk rtask, vals []uint64, scratch *uint64) (read uint64, redux map[int]uint64) {
	var sum uint64
	for _, o := range tk.ops {
		// Commuting writers must not read their handle: their order is free.
		if o.mode == scheduler.ModeR || o.mode == scheduler.ModeRW {
			sum = sum*mix + vals[o.h]
		}
	}
	for _, o := range tk.ops {
		switch {
		case o.mode == scheduler.ModeW:
			vals[o.h] = sum*7 + uint64(i)
		case o.mode == scheduler.ModeRW:
			vals[o.h] = vals[o.h]*mix + sum + uint64(i)
		case o.mode&scheduler.ModeCommute != 0:
			vals[o.h] += sum + uint64(i)*uint64(i)
		case o.mode == scheduler.ModeRedux:
			if redux == nil {
				redux = map[int]uint64{}
			}
			redux[o.h] += uint64(i) + 1
		case o.mode == scheduler.ModeScratch:
			*scratch = sum + uint64(i)
		}
	}
	return sum, redux
}

func genFlow(r *rand.Rand, ntasks, nhandles int) []rtask {
	modes := []scheduler.Mode{scheduler.ModeR, scheduler.ModeR, scheduler.ModeW, scheduler.ModeRW, scheduler.ModeRW,
		scheduler.ModeRW | scheduler.ModeCommute, scheduler.ModeRedux, scheduler.ModeScratch}
	var flow []rtask
	for i := 0; i < ntasks; i++ {
		n := 1 + r.IntN(4)
		used := map[int]bool{}
		var tk rtask
		for len(tk.ops) < n {
			h := r.IntN(nhandles)
			if used[h] {
				continue
			}
			used[h] = true
			tk.ops = append(tk.ops, rop{h, modes[r.IntN(len(modes))]})
		}
		if i > 0 && r.IntN(8) == 0 {
			tk.after = append(tk.after, r.IntN(i))
		}
		flow = append(flow, tk)
	}
	return flow
}

func TestImplicitDepsMatchSequential(t *testing.T) {
	policies := []string{"lws", "eager", "dmda", "random"}
	for pi, p := range policies {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", p, seed), func(t *testing.T) {
				const ntasks, nhandles = 1500, 10
				r := rand.New(rand.NewPCG(seed, uint64(pi)))
				flow := genFlow(r, ntasks, nhandles)

				// Sequential reference.
				want := make([]uint64, nhandles)
				for i := range want {
					want[i] = uint64(i + 1)
				}
				wantRead := make([]uint64, ntasks)
				for i, tk := range flow {
					var sc uint64
					var red map[int]uint64
					wantRead[i], red = applyTask(i, tk, want, &sc)
					for h, v := range red {
						want[h] += v
					}
				}

				ctx := testCtx(t)
				s := newSched(t, scheduler.WithPolicy(p), scheduler.WithWorkers(3))
				vals := make([]uint64, nhandles)
				hs := make([]*scheduler.Handle, nhandles)
				init := &scheduler.Codelet{Name: "zero", CPU: func(c *scheduler.Call) error {
					*scheduler.ValueOf[*uint64](c, 0) = 0
					return nil
				}}
				combine := &scheduler.Codelet{Name: "add", CPU: func(c *scheduler.Call) error {
					*scheduler.ValueOf[*uint64](c, 0) += *scheduler.ValueOf[*uint64](c, 1)
					return nil
				}}
				for i := range hs {
					vals[i] = uint64(i + 1)
					var err error
					hs[i], err = s.RegisterValue(&vals[i])
					require.NoError(t, err)
					require.NoError(t, hs[i].SetReduction(init, combine))
				}
				gotRead := make([]uint64, ntasks)
				tasks := make([]*scheduler.Task, ntasks)
				for i, tk := range flow {
					i, tk := i, tk
					cl := &scheduler.Codelet{Name: "op", CPU: func(c *scheduler.Call) error {
						// Work on the buffers the scheduler gives: private
						// copies for Redux and Scratch.
						local := make([]uint64, nhandles)
						for k, o := range tk.ops {
							local[o.h] = *scheduler.ValueOf[*uint64](c, k)
						}
						var sc uint64
						read, red := applyTask(i, tk, local, &sc)
						gotRead[i] = read
						for k, o := range tk.ops {
							p := scheduler.ValueOf[*uint64](c, k)
							switch {
							case o.mode == scheduler.ModeRedux:
								*p += red[o.h]
							case o.mode == scheduler.ModeScratch:
								*p = sc
							case o.mode&scheduler.ModeW != 0:
								*p = local[o.h]
							}
						}
						return nil
					}}
					args := []scheduler.Arg{}
					for _, o := range tk.ops {
						args = append(args, scheduler.Data(hs[o.h], o.mode))
					}
					for _, a := range tk.after {
						args = append(args, scheduler.After(tasks[a]))
					}
					tasks[i] = scheduler.NewTask(cl, args...)
					require.NoError(t, s.SubmitTask(ctx, tasks[i]))
				}
				for i, h := range hs {
					v, err := h.Unregister(ctx)
					require.NoError(t, err)
					require.Equal(t, want[i], *v.(*uint64), "handle %d", i)
				}
				require.NoError(t, s.WaitAll(ctx))
				for i := range flow {
					require.Equal(t, wantRead[i], gotRead[i], "values read by task %d", i)
				}
			})
		}
	}
}

// TestSameHandleTwice: a task that names one handle twice (R and RW, or
// R and R) is wired once for it, with the union of its modes: the tasks
// on the handle run in submission order and none deadlocks on its own
// handle.
func TestSameHandleTwice(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(2))
	x := []int64{0}
	h, err := s.RegisterVector(x, scheduler.Named("x"))
	require.NoError(t, err)
	var order []int64
	inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
		in, out := scheduler.VectorOf[int64](c, 0), scheduler.VectorOf[int64](c, 1)
		out[0] = in[0] + 1
		return nil
	}}
	look := &scheduler.Codelet{Name: "look", CPU: func(c *scheduler.Call) error {
		order = append(order, scheduler.VectorOf[int64](c, 0)[0]+scheduler.VectorOf[int64](c, 1)[0])
		return nil
	}}
	for i := range 50 {
		require.NoError(t, s.Submit(ctx, inc, scheduler.R(h), scheduler.RW(h)))
		if i%10 == 9 {
			require.NoError(t, s.Submit(ctx, look, scheduler.R(h), scheduler.R(h)))
		}
	}
	require.NoError(t, s.WaitAll(ctx))
	require.Equal(t, int64(50), x[0])
	require.Equal(t, []int64{20, 40, 60, 80, 100}, order, "each look ran after the incs before it and before those after")
}
