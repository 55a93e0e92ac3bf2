package dist_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// int64s reads a task argument given as []int64, which it is on every
// rank (RunMaster sends the argument's Go type).
func int64s(a any) []int64 { return a.([]int64) }

// mwApply is apply for master/worker mode: its argument is [mode, add].
var mwApply = &scheduler.Codelet{Name: "mw.apply", CPU: func(c *scheduler.Call) error {
	a := int64s(c.Arg)
	o := op{mode: scheduler.Mode(a[0]), add: a[1]}
	var reads [][]int64
	for i := 1; i < c.Len(); i++ {
		reads = append(reads, scheduler.VectorOf[int64](c, i))
	}
	o.apply(scheduler.VectorOf[int64](c, 0), reads)
	return nil
}}

// The random graphs, submitted on one rank only, run on the cores of every
// rank and give what the sequential run gives.
func TestMasterWorkerRandomGraphs(t *testing.T) {
	for ranks := 1; ranks <= 4; ranks++ {
		t.Run(fmt.Sprintf("ranks=%d", ranks), func(t *testing.T) {
			const nh, ntasks = 10, 120
			_, ops := randomGraph(uint64(ranks), nh, ntasks, ranks)
			want := sequential(nh, ops)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			var remoteRuns int
			err := local.Run(ctx, ranks, func(ctx context.Context, c comm.Comm) error {
				reg, err := dist.NewRegistry(mwApply, zero, add)
				if err != nil {
					return err
				}
				return dist.RunMaster(ctx, c, 0, reg, []scheduler.Option{scheduler.WithWorkers(1), scheduler.WithStats(true)}, func(ctx context.Context, m *dist.Master) error {
					if m.Workers() != ranks {
						return fmt.Errorf("%d workers, want one per rank (%d)", m.Workers(), ranks)
					}
					data := make([][]int64, nh)
					hs := make([]*scheduler.Handle, nh)
					for h := range nh {
						data[h] = make([]int64, vecLen)
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
					// Every other task goes to a context of the other ranks'
					// proxies, so that some surely run remotely.
					remote := ctx
					if ranks > 1 {
						ids := make([]int, 0, ranks-1)
						for w := 1; w < m.Workers(); w++ {
							ids = append(ids, w)
						}
						cx, err := m.Local().NewContext("remote", scheduler.ContextWorkers(ids...))
						if err != nil {
							return err
						}
						remote = scheduler.Within(ctx, cx)
					}
					for i, o := range ops {
						args := []scheduler.Arg{scheduler.Data(hs[o.target], o.mode), scheduler.WithArg([]int64{int64(o.mode), o.add})}
						for _, r := range o.reads {
							args = append(args, scheduler.R(hs[r]))
						}
						sctx := ctx
						if i%2 == 1 {
							sctx = remote
						}
						if err := m.Submit(sctx, mwApply, args...); err != nil {
							return err
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
							return fmt.Errorf("handle %d differs from the sequential run", h)
						}
					}
					for _, st := range m.Local().Stats()[1:] {
						remoteRuns += int(st.Tasks)
					}
					return nil
				})
			})
			require.NoError(t, err)
			if ranks > 1 {
				assert.Positive(t, remoteRuns, "no task ran on another rank")
			}
		})
	}
}

// A codelet some rank does not know is refused at the master's Submit,
// naming the rank; nothing crashes on the worker. So is one that is not
// the registry's codelet of its name.
func TestMasterUnknownCodelet(t *testing.T) {
	extra := &scheduler.Codelet{Name: "extra", CPU: func(*scheduler.Call) error { return nil }}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var submitErr error
	err := local.Run(ctx, 3, func(ctx context.Context, c comm.Comm) error {
		cls := []*scheduler.Codelet{mwApply}
		if c.Rank() != 2 {
			cls = append(cls, extra)
		}
		reg, err := dist.NewRegistry(cls...)
		if err != nil {
			return err
		}
		return dist.RunMaster(ctx, c, 0, reg, []scheduler.Option{scheduler.WithWorkers(1)}, func(ctx context.Context, m *dist.Master) error {
			h, err := m.Local().RegisterVector(make([]int64, 4))
			if err != nil {
				return err
			}
			submitErr = m.Submit(ctx, extra, scheduler.RW(h))
			other := &scheduler.Codelet{Name: "other", CPU: extra.CPU}
			if err := m.Submit(ctx, other, scheduler.RW(h)); !errors.Is(err, dist.ErrUnknownCodelet) {
				return fmt.Errorf("a codelet in no registry: %v", err)
			}
			if err := m.Submit(ctx, nil, scheduler.RW(h)); !errors.Is(err, comm.ErrInvalidArg) || !contains(err, "nil codelet") {
				return fmt.Errorf("a nil codelet: %v", err)
			}
			// Another codelet under a registered name would run the
			// registered one's code on every rank: refused.
			ran := false
			impostor := &scheduler.Codelet{Name: mwApply.Name, CPU: func(*scheduler.Call) error { ran = true; return nil }}
			if err := m.Submit(ctx, impostor, scheduler.RW(h)); !errors.Is(err, dist.ErrUnknownCodelet) || !contains(err, "the registry holds another codelet of that name") {
				return fmt.Errorf("another codelet under a registered name: %v", err)
			}
			if err := m.WaitAll(ctx); err != nil || ran {
				return fmt.Errorf("after the impostor: %v, ran %v", err, ran)
			}
			return nil
		})
	})
	require.NoError(t, err)
	require.ErrorIs(t, submitErr, dist.ErrUnknownCodelet)
	assert.Contains(t, submitErr.Error(), "ranks [2]")
	assert.Contains(t, submitErr.Error(), "pass it to dist.NewRegistry on every rank")
}

// Tiles of a partitioned matrix (leading dimension wider than the tile)
// run on other ranks: they travel packed and come back into place, the
// neighbouring tiles untouched.
func TestMasterWorkerStridedTiles(t *testing.T) {
	scale := &scheduler.Codelet{Name: "mw.scale", CPU: func(c *scheduler.Call) error {
		m := scheduler.MatrixOf[float64](c, 0)
		for i := range m.Rows {
			for j := range m.Cols {
				m.Set(i, j, 10*m.At(i, j))
			}
		}
		return nil
	}}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		reg, err := dist.NewRegistry(scale)
		if err != nil {
			return err
		}
		return dist.RunMaster(ctx, c, 0, reg, []scheduler.Option{scheduler.WithWorkers(1), scheduler.WithStats(true)}, func(ctx context.Context, m *dist.Master) error {
			const n = 6
			a := make([]float64, n*n)
			for i := range a {
				a[i] = float64(i)
			}
			h, err := m.Local().RegisterMatrix(a, n, n)
			if err != nil {
				return err
			}
			tiles, err := h.Partition(scheduler.Blocks(3, 3))
			if err != nil {
				return err
			}
			cx, err := m.Local().NewContext("remote", scheduler.ContextWorkers(1))
			if err != nil {
				return err
			}
			// The top-left and bottom-right tiles, on rank 1.
			for _, tl := range []*scheduler.Handle{tiles[0][0], tiles[1][1]} {
				if err := m.Submit(scheduler.Within(ctx, cx), scale, scheduler.RW(tl)); err != nil {
					return err
				}
			}
			if err := m.WaitAll(ctx); err != nil {
				return err
			}
			if err := h.Unpartition(); err != nil {
				return err
			}
			for i := range n {
				for j := range n {
					want := float64(i*n + j)
					if (i < 3) == (j < 3) {
						want *= 10
					}
					if a[i*n+j] != want {
						return fmt.Errorf("element (%d,%d) is %v, want %v", i, j, a[i*n+j], want)
					}
				}
			}
			if m.Local().Stats()[1].Tasks != 2 {
				return fmt.Errorf("rank 1's proxy ran %d tasks, want 2", m.Local().Stats()[1].Tasks)
			}
			return nil
		})
	})
	require.NoError(t, err)
}

// RankOf names the rank of each of the master's workers (its own cores,
// then each other rank's in order), and a context of one rank's workers
// keeps tasks on that rank: the master counts them on those workers, and
// their results come back.
func TestMasterRankOf(t *testing.T) {
	double := &scheduler.Codelet{Name: "mw.double", CPU: func(c *scheduler.Call) error {
		for i, x := range scheduler.VectorOf[int64](c, 0) {
			scheduler.VectorOf[int64](c, 0)[i] = 2 * x
		}
		return nil
	}}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var ranks []int
	var onRank2 int64
	var got [][]int64
	err := local.Run(ctx, 3, func(ctx context.Context, c comm.Comm) error {
		reg, err := dist.NewRegistry(double)
		if err != nil {
			return err
		}
		return dist.RunMaster(ctx, c, 1, reg, []scheduler.Option{scheduler.WithWorkers(2)}, func(ctx context.Context, m *dist.Master) error {
			var two []int
			for w := -1; w <= m.Workers(); w++ {
				ranks = append(ranks, m.RankOf(w))
				if m.RankOf(w) == 2 {
					two = append(two, w)
				}
			}
			cx, err := m.Local().NewContext("rank 2", scheduler.ContextWorkers(two...))
			if err != nil {
				return err
			}
			for i := range 6 {
				v := []int64{int64(i), 10}
				h, err := m.Local().RegisterVector(v)
				if err != nil {
					return err
				}
				if err := m.Submit(ctx, double, scheduler.RW(h), scheduler.InContext(cx)); err != nil {
					return err
				}
				if err := m.WaitAll(ctx); err != nil {
					return err
				}
				if _, err := h.Unregister(ctx); err != nil {
					return err
				}
				got = append(got, v)
			}
			for _, st := range m.Local().Stats() {
				if m.RankOf(st.Worker) == 2 {
					onRank2 += st.Tasks
				}
			}
			return nil
		})
	})
	require.NoError(t, err)
	// Worker -1 and 6 are none; the master (rank 1) first, then ranks 0 and 2.
	assert.Equal(t, []int{-1, 1, 1, 0, 0, 2, 2, -1}, ranks)
	assert.EqualValues(t, 6, onRank2, "the tasks of the rank-2 context ran on rank 2's workers")
	for i, v := range got {
		assert.Equal(t, []int64{int64(2 * i), 20}, v)
	}
}
