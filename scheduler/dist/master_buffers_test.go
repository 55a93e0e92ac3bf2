package dist_test

import (
	"context"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// A worker rank receives a task's buffers into the buffers of its slot's
// task before when their sizes match, instead of allocating them afresh;
// each task still sees its own data (not the last task's), a buffer of
// another size is new, and Scratch buffers are fresh and zeroed.
func TestMasterWorkerReusesBuffers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	type seen struct {
		rank int
		ptr  uintptr // the task's first buffer on the rank that ran it
		sum  int64   // the sum of its R buffer
		zero bool    // its Scratch buffer was all zeros
	}
	var got []seen // rank 1's codelet appends here; read after the run
	err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		// The codelet: x[0] = the sum of the R buffer y, and it marks its
		// Scratch buffer s, which the next task must not see.
		look := &scheduler.Codelet{Name: "look", CPU: func(call *scheduler.Call) error {
			x := scheduler.VectorOf[int64](call, 0)
			y := scheduler.VectorOf[int64](call, 1)
			s := scheduler.VectorOf[int64](call, 2)
			var sum int64
			for _, v := range y {
				sum += v
			}
			zero := true
			for i := range s {
				zero = zero && s[i] == 0
				s[i] = 99
			}
			x[0] = sum
			if c.Rank() == 1 {
				got = append(got, seen{c.Rank(), uintptr(unsafe.Pointer(&x[0])), sum, zero})
			}
			return nil
		}}
		reg, err := dist.NewRegistry(look)
		if err != nil {
			return err
		}
		return dist.RunMaster(ctx, c, 0, reg, []scheduler.Option{scheduler.WithWorkers(1)}, func(ctx context.Context, m *dist.Master) error {
			remote, err := m.Local().NewContext("rank 1", scheduler.ContextWorkers(1))
			if err != nil {
				return err
			}
			// Tasks 0-2 of 1000 elements, 3 of 500, 4 of 1000 again:
			// each reads a vector of its own contents.
			sizes := []int{1000, 1000, 1000, 500, 1000}
			xs := make([][]int64, len(sizes))
			for k, n := range sizes {
				xs[k] = make([]int64, n)
				y := make([]int64, n)
				for i := range y {
					y[i] = int64(k + 1)
				}
				hx, err := m.Local().RegisterVector(xs[k])
				if err != nil {
					return err
				}
				hy, err := m.Local().RegisterVector(y)
				if err != nil {
					return err
				}
				hs, err := m.Local().RegisterVector(make([]int64, n))
				if err != nil {
					return err
				}
				if err := m.Submit(ctx, look, scheduler.RW(hx), scheduler.R(hy), scheduler.Data(hs, scheduler.ModeScratch), scheduler.InContext(remote)); err != nil {
					return err
				}
				if err := m.WaitAll(ctx); err != nil {
					return err
				}
				if _, err := hx.Unregister(ctx); err != nil {
					return err
				}
			}
			for k, n := range sizes {
				assert.Equal(t, int64(n*(k+1)), xs[k][0], "task %d's result", k)
			}
			return nil
		})
	})
	require.NoError(t, err)
	require.Len(t, got, 5, "every task ran on rank 1")
	for k, s := range got {
		assert.True(t, s.zero, "task %d's Scratch buffer is zeroed", k)
	}
	assert.Equal(t, got[0].ptr, got[1].ptr, "task 1 reuses task 0's buffer")
	assert.Equal(t, got[1].ptr, got[2].ptr, "task 2 reuses task 1's buffer")
	assert.NotEqual(t, got[2].ptr, got[3].ptr, "task 3 (another size) has a buffer of its own")
}

// Submit and WaitAll on a Master whose RunMaster has returned both return
// an error wrapping scheduler.ErrClosed that says so (WaitAll returned
// nil, Submit 'scheduler: closed').
func TestMasterAfterRunMasterReturned(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var kept *dist.Master
	var h *scheduler.Handle // registered on the master's scheduler within fn
	err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		reg, err := dist.NewRegistry(mwInc0)
		if err != nil {
			return err
		}
		return dist.RunMaster(ctx, c, 0, reg, []scheduler.Option{scheduler.WithWorkers(1)}, func(ctx context.Context, m *dist.Master) error {
			kept = m
			var err error
			h, err = m.Local().RegisterVector(make([]float64, 1))
			return err
		})
	})
	require.NoError(t, err)
	require.NotNil(t, kept)
	werr := kept.WaitAll(ctx)
	require.ErrorIs(t, werr, scheduler.ErrClosed)
	assert.Contains(t, werr.Error(), "RunMaster has returned")
	serr := kept.Submit(ctx, mwInc0, scheduler.RW(h))
	require.ErrorIs(t, serr, scheduler.ErrClosed)
	assert.Contains(t, serr.Error(), "RunMaster has returned")
}
