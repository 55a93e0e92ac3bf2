package dist_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// incF adds 1 to every element of its one float64 matrix.
var incF = &scheduler.Codelet{Name: "incF", CPU: func(c *scheduler.Call) error {
	v := scheduler.VectorOf[float64](c, 0)
	for i := range v {
		v[i]++
	}
	return nil
}}

// deviceOpts are local options with a simulated device whose worker is
// the last one; onDevice runs a task there.
var deviceOpts = []scheduler.Option{scheduler.WithWorkers(1), scheduler.WithPerfModelDir(""),
	scheduler.WithGetenv(func(string) string { return "" }),
	scheduler.WithSimDevices(scheduler.SimDevice{Memory: 1 << 20, Bandwidth: -1})}

func onDevice(d *dist.Scheduler) (dist.Arg, error) {
	s := d.Local()
	c, err := s.NewContext("device", scheduler.ContextWorkers(len(s.Workers())-1))
	if err != nil {
		return dist.Arg{}, err
	}
	return dist.With(scheduler.InContext(c)), nil
}

// TestOwnerHostWriteReachesItsDevice: with a device on the owner's
// rank, WaitAll leaves the latest version in the owner's memory (Data),
// and what the owner writes through Data afterwards is what the next
// task on its device computes from.
func TestOwnerHostWriteReachesItsDevice(t *testing.T) {
	for _, ranks := range []int{1, 2} {
		t.Run(fmt.Sprintf("ranks=%d", ranks), func(t *testing.T) {
			require.NoError(t, runRanksWith(t, ranks, deviceOpts, func(ctx context.Context, d *dist.Scheduler) error {
				dev, err := onDevice(d)
				if err != nil {
					return err
				}
				var mine []float64
				if d.Rank() == 0 {
					mine = make([]float64, 4)
				}
				h, err := dist.Register(d, 0, mine, 4, 1, scheduler.Named("x"))
				if err != nil {
					return err
				}
				if err := d.Submit(ctx, incF, dist.RW(h), dev); err != nil {
					return err
				}
				if err := d.WaitAll(ctx); err != nil {
					return err
				}
				if d.Rank() == 0 {
					if got := h.Data().([]float64); !slices.Equal(got, []float64{1, 1, 1, 1}) {
						return fmt.Errorf("owner's data after WaitAll: %v, want the device's result", got)
					}
					for i := range mine {
						mine[i] = 100
					}
				}
				if err := d.Submit(ctx, incF, dist.RW(h), dev); err != nil {
					return err
				}
				if err := d.WaitAll(ctx); err != nil {
					return err
				}
				if d.Rank() == 0 && !slices.Equal(mine, []float64{101, 101, 101, 101}) {
					return fmt.Errorf("after a host write through Data and a device task: %v, want 101s", mine)
				}
				return nil
			}))
		})
	}
}

// TestUpdateReachesCachedCopies: Update changes a handle between graphs
// on its owner, and a rank that holds a cached copy of the previous
// version (it read it) reads the new one; a write through Data would
// not reach it.
func TestUpdateReachesCachedCopies(t *testing.T) {
	opts := func(rank int) []scheduler.Option {
		if rank == 1 {
			return deviceOpts // the reader computes on a device
		}
		return []scheduler.Option{scheduler.WithWorkers(1)}
	}
	require.NoError(t, runRanksEach(t, 2, opts, func(ctx context.Context, d *dist.Scheduler) error {
		var mine []float64
		if d.Rank() == 0 {
			mine = make([]float64, 4)
		}
		h, err := dist.Register(d, 0, mine, 4, 1, scheduler.Named("x"))
		if err != nil {
			return err
		}
		seen := make(chan []float64, 3) // one per read
		rd := &scheduler.Codelet{Name: "read", CPU: func(c *scheduler.Call) error {
			seen <- slices.Clone(scheduler.VectorOf[float64](c, 0))
			return nil
		}}
		read := func() error {
			if err := d.Submit(ctx, rd, dist.R(h), dist.OnRank(1)); err != nil {
				return err
			}
			return d.WaitAll(ctx)
		}
		if err := d.Submit(ctx, incF, dist.RW(h)); err != nil {
			return err
		}
		if err := read(); err != nil {
			return err
		}
		for round := range 2 {
			err := dist.Update(ctx, d, h, func(x []float64) error {
				x[0] = float64(42 + round)
				return nil
			})
			if err != nil {
				return err
			}
			if err := read(); err != nil {
				return err
			}
		}
		if d.Rank() == 1 {
			want := [][]float64{{1, 1, 1, 1}, {42, 1, 1, 1}, {43, 1, 1, 1}}
			for i, w := range want {
				if got := <-seen; !slices.Equal(got, w) {
					return fmt.Errorf("read %d on rank 1: %v, want %v", i, got, w)
				}
			}
		}
		if d.Rank() == 0 && mine[0] != 43 {
			return fmt.Errorf("owner's data: %v", mine)
		}
		// A type that is not the handle's is refused on every rank.
		err = dist.Update(ctx, d, h, func([]int32) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "a function of []int32 for a handle of float64") {
			return fmt.Errorf("Update with []int32 of a float64 handle: %v", err)
		}
		// fn's error fails the graph on every rank, naming the handle: at
		// WaitAll, or at the Update of a rank that hears of it first.
		err = dist.Update(ctx, d, h, func([]float64) error { return errors.New("sensor offline") })
		if err == nil {
			err = d.WaitAll(ctx)
		}
		if !errors.Is(err, dist.ErrRankFailed) || !strings.Contains(err.Error(), `Update of handle "x" (#0, owner 0): sensor offline`) {
			return fmt.Errorf("Update and WaitAll after a failed Update on rank %d: %v", d.Rank(), err)
		}
		return nil
	}))
}
