package dist_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// mixedOp is one task of TestMasterWorkerMixedSizesAndModes: target in
// mode (W, RW or Redux), reads in R, and, when scratch > 0, a Scratch
// buffer of that many elements.
type mixedOp struct {
	target  int
	mode    scheduler.Mode
	reads   []int
	add     int64
	scratch int
}

// apply computes the task on target with reads as the codelet does.
func (o mixedOp) apply(target []int64, reads [][]int64) {
	for i := range target {
		v := o.add + int64(i)
		if o.mode == scheduler.ModeRW {
			v += 3 * target[i]
		}
		for _, r := range reads {
			v += r[i%len(r)]
		}
		if o.mode == scheduler.ModeRedux {
			v += target[i]
		}
		target[i] = v
	}
}

// mixedApply is the codelet of TestMasterWorkerMixedSizesAndModes. Its
// argument is [mode, add, reads, scratch?]: buffer 0 is the target, the
// next reads buffers are read, and the last, when there is a Scratch
// access, is overwritten first (a Scratch buffer is uninitialized; one
// that shared memory with the task's data would change the result).
var mixedApply = &scheduler.Codelet{Name: "mixed.apply", CPU: func(c *scheduler.Call) error {
	a := int64s(c.Arg)
	o := mixedOp{mode: scheduler.Mode(a[0]), add: a[1]}
	nr := int(a[2])
	if a[3] != 0 {
		s := scheduler.VectorOf[int64](c, nr+1)
		for i := range s {
			s[i] = -1 << 40
		}
	}
	var reads [][]int64
	for i := 1; i <= nr; i++ {
		reads = append(reads, scheduler.VectorOf[int64](c, i))
	}
	o.apply(scheduler.VectorOf[int64](c, 0), reads)
	return nil
}}

// TestMasterWorkerMixedSizesAndModes: random graphs of tasks on vectors
// of several lengths, in W, RW and Redux with up to three R reads and
// sometimes a Scratch buffer of a random length, submitted by the master
// and run on the cores of 2 and 3 ranks (2 slots per worker rank, which
// share its scheduler), give what the sequential run gives. Worker slots keep a task's buffers
// for the next task of the same sizes (a1cf106): a buffer handed to a
// task while another still used it, or kept with the last task's data
// where the task reads what the master sent, would change the results.
func TestMasterWorkerMixedSizesAndModes(t *testing.T) {
	lens := []int{1, 5, 5, 64, 64, 700, 700, 1500}
	for _, ranks := range []int{2, 3} {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("ranks=%d/seed=%d", ranks, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(ranks)))
				nh := len(lens)
				var ops []mixedOp
				for range 150 {
					o := mixedOp{target: rng.IntN(nh), add: int64(rng.IntN(100))}
					switch rng.IntN(4) {
					case 0:
						o.mode = scheduler.ModeW
					case 1:
						o.mode = scheduler.ModeRedux
					default:
						o.mode = scheduler.ModeRW
					}
					for range rng.IntN(4) {
						if r := rng.IntN(nh); r != o.target && !slices.Contains(o.reads, r) {
							o.reads = append(o.reads, r)
						}
					}
					if rng.IntN(3) == 0 {
						o.scratch = lens[rng.IntN(nh)]
					}
					ops = append(ops, o)
				}
				want := make([][]int64, nh)
				for h := range want {
					want[h] = make([]int64, lens[h])
					for i := range want[h] {
						want[h][i] = initial(h, i)
					}
				}
				for _, o := range ops {
					var reads [][]int64
					for _, r := range o.reads {
						reads = append(reads, want[r])
					}
					o.apply(want[o.target], reads)
				}
				ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
				defer cancel()
				err := local.Run(ctx, ranks, func(ctx context.Context, c comm.Comm) error {
					reg, err := dist.NewRegistry(mixedApply, zero, add)
					if err != nil {
						return err
					}
					return dist.RunMaster(ctx, c, 0, reg, []scheduler.Option{scheduler.WithWorkers(2)}, func(ctx context.Context, m *dist.Master) error {
						// One Scratch handle per length: Scratch accesses
						// make no dependency.
						scratch := map[int]*scheduler.Handle{}
						for _, n := range lens {
							if scratch[n] == nil {
								if scratch[n], err = m.Local().RegisterVector(make([]int64, n)); err != nil {
									return err
								}
							}
						}
						data := make([][]int64, nh)
						hs := make([]*scheduler.Handle, nh)
						for h := range nh {
							data[h] = make([]int64, lens[h])
							for i := range data[h] {
								data[h][i] = initial(h, i)
							}
							if hs[h], err = m.Local().RegisterVector(data[h]); err != nil {
								return err
							}
							if err := hs[h].SetReduction(zero, add); err != nil {
								return err
							}
						}
						// Most tasks on the other ranks' proxies.
						var ids []int
						for w := range m.Workers() {
							if m.RankOf(w) != 0 {
								ids = append(ids, w)
							}
						}
						cx, err := m.Local().NewContext("remote", scheduler.ContextWorkers(ids...))
						if err != nil {
							return err
						}
						remote := scheduler.Within(ctx, cx)
						for i, o := range ops {
							flag := int64(0)
							if o.scratch > 0 {
								flag = 1
							}
							args := []scheduler.Arg{scheduler.Data(hs[o.target], o.mode), scheduler.WithArg([]int64{int64(o.mode), o.add, int64(len(o.reads)), flag})}
							for _, r := range o.reads {
								args = append(args, scheduler.R(hs[r]))
							}
							if o.scratch > 0 {
								args = append(args, scheduler.Scratch(scratch[o.scratch]))
							}
							sctx := remote
							if i%4 == 0 {
								sctx = ctx
							}
							if err := m.Submit(sctx, mixedApply, args...); err != nil {
								return fmt.Errorf("task %d: %w", i, err)
							}
						}
						if err := m.WaitAll(ctx); err != nil {
							return err
						}
						for h := range nh {
							if _, err := hs[h].Unregister(ctx); err != nil {
								return err
							}
							if !slices.Equal(data[h], want[h]) {
								return fmt.Errorf("handle %d (%d elements) differs from the sequential run", h, lens[h])
							}
						}
						return nil
					})
				})
				require.NoError(t, err)
			})
		}
	}
}
