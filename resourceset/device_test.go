package resourceset_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/resourceset"
)

// TestDeviceBadInput feeds the device component what it must refuse:
// foreign or mismatched devices, wrong lengths, freed and nil slices,
// a root's invalid destination (an error on every rank, not a hang).
func TestDeviceBadInput(t *testing.T) {
	ctx := context.Background()
	err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		dev, machines := simMachines(t, ctx, c)
		other, err := resourceset.New(c, 1-c.Rank(), machines[1-c.Rank()], nil)
		require.NoError(t, err)
		require.ErrorIs(t, other.AttachDevices([]accel.Device{dev}), resourceset.ErrInvalid)
		me, err := resourceset.New(c, c.Rank(), machines[c.Rank()], nil)
		require.NoError(t, err)
		require.ErrorIs(t, me.AttachDevices(nil), resourceset.ErrInvalid)
		wrong, err := accel.NewSim(7, accel.SimConfig{})
		require.NoError(t, err)
		defer wrong.Close()
		require.ErrorIs(t, me.AttachDevices([]accel.Device{wrong}), resourceset.ErrInvalid)
		// Before AttachDevices nothing can be allocated.
		_, err = resourceset.Alloc[float64](me.Devices()[0], 2)
		require.ErrorIs(t, err, resourceset.ErrInvalid)
		require.NoError(t, me.AttachDevices([]accel.Device{dev}))

		_, err = resourceset.Alloc[float64](me.Devices()[0], -1)
		require.ErrorIs(t, err, resourceset.ErrInvalid)
		_, err = resourceset.Alloc[float64](me.Devices()[0], 1<<14)
		require.ErrorIs(t, err, accel.ErrOutOfMemory)
		s, err := resourceset.Alloc[float64](me.Devices()[0], 4)
		require.NoError(t, err)
		require.ErrorIs(t, s.CopyFrom(ctx, make([]float64, 3)), resourceset.ErrInvalid)
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		require.ErrorIs(t, s.CopyTo(canceled, make([]float64, 4)), context.Canceled)
		require.ErrorIs(t, resourceset.BcastDevice(ctx, nil, s), resourceset.ErrInvalid)
		require.ErrorIs(t, resourceset.BcastDevice[float64](ctx, other.Devices()[0], nil), resourceset.ErrInvalid)

		// The root passes a destination of the wrong length: every rank
		// gets an error.
		root := other.Devices()[0]
		if c.Rank() == 1 {
			root = me.Devices()[0]
		}
		var into *resourceset.DeviceSlice[float64]
		if c.Rank() == 1 {
			into, err = resourceset.Alloc[float64](root, 5)
			require.NoError(t, err)
		}
		_, err = resourceset.ReduceDevice(ctx, root, s, into, comm.Sum)
		require.Error(t, err)
		if c.Rank() == 0 {
			require.ErrorIs(t, err, comm.ErrMismatch)
		} else {
			require.ErrorIs(t, err, resourceset.ErrInvalid)
		}
		s.Free()
		require.ErrorIs(t, s.CopyFrom(ctx, make([]float64, 4)), resourceset.ErrInvalid)
		return nil
	})
	require.NoError(t, err)
}

// TestDeviceAsyncCopyRange: an asynchronous copy outside the slice, at a
// negative offset or on a freed slice is an error on its channel; it
// crashed the process on the copy engine's goroutine (a slice bounds
// panic no caller could recover), and on a GPU it would have written
// outside the allocation.
func TestDeviceAsyncCopyRange(t *testing.T) {
	ctx := context.Background()
	err := local.Run(ctx, 1, func(ctx context.Context, c comm.Comm) error {
		dev, machines := simMachines(t, ctx, c)
		me, err := resourceset.New(c, 0, machines[0], nil)
		require.NoError(t, err)
		require.NoError(t, me.AttachDevices([]accel.Device{dev}))
		s, err := resourceset.Alloc[float64](me.Devices()[0], 10)
		require.NoError(t, err)
		for _, tc := range []struct {
			name    string
			off, n  int
			wantErr string
		}{
			{"past the end", 8, 5, "CopyInAsync of 5 elements at offset 8 on a DeviceSlice of 10"},
			{"negative offset", -1, 5, "at offset -1"},
			{"offset past the end", 11, 0, "at offset 11"},
		} {
			err := <-s.CopyInAsync(tc.off, make([]float64, tc.n))
			require.ErrorIs(t, err, resourceset.ErrInvalid, tc.name)
			require.ErrorContains(t, err, tc.wantErr, tc.name)
			err = <-s.CopyOutAsync(tc.off, make([]float64, tc.n))
			require.ErrorIs(t, err, resourceset.ErrInvalid, tc.name)
		}
		// The last elements, exactly: fine.
		require.NoError(t, <-s.CopyInAsync(7, []float64{1, 2, 3}))
		got := make([]float64, 3)
		require.NoError(t, <-s.CopyOutAsync(7, got))
		require.Equal(t, []float64{1, 2, 3}, got)
		s.Free()
		require.ErrorIs(t, <-s.CopyOutAsync(0, make([]float64, 5)), resourceset.ErrInvalid, "freed")
		require.ErrorIs(t, <-s.CopyInAsync(0, make([]float64, 5)), resourceset.ErrInvalid, "freed")
		return nil
	})
	require.NoError(t, err)
}

// simMachines opens a simulated device of 64 KiB for this rank (closed at
// the test's end) and exchanges a description of one such device per
// rank.
func simMachines(t *testing.T, ctx context.Context, c comm.Comm) (accel.Device, []*hardware.Machine) {
	t.Helper()
	dev, err := accel.NewSim(0, accel.SimConfig{Memory: 1 << 16})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dev.Close() })
	desc := &hardware.Machine{Accelerators: []hardware.Accelerator{{Name: "sim0", Kind: "sim", MemoryBytes: 1 << 16}}}
	machines, err := resourceset.Exchange(ctx, c, desc)
	require.NoError(t, err)
	return dev, machines
}

// TestDeviceCollectiveInvalidMineFailsEveryRank: a rank that passes a
// nil or freed slice (or one on another rank's device) to a device
// collective returned at once, before the agreement step the other ranks
// were in, so they paired this call with its next one ("GatherDevice on
// this rank, ReduceDevice on rank 1") or, with none, waited for it (under
// MPI for ever). Now that rank takes part and every rank gets an error,
// naming it on the others, and the ranks stay in step.
func TestDeviceCollectiveInvalidMineFailsEveryRank(t *testing.T) {
	ctx := context.Background()
	const n, badRank = 3, 1
	err := local.Run(ctx, n, func(ctx context.Context, c comm.Comm) error {
		dev, machines := simMachines(t, ctx, c)
		sets := make([]*resourceset.ResourceSet, n)
		for r := range sets {
			rs, err := resourceset.New(c, r, machines[r], nil)
			require.NoError(t, err)
			sets[r] = rs
		}
		me := sets[c.Rank()]
		require.NoError(t, me.AttachDevices([]accel.Device{dev}))
		mydev := me.Devices()[0]
		good, err := resourceset.Alloc[float64](mydev, 2)
		require.NoError(t, err)
		defer good.Free()
		into, err := resourceset.Alloc[float64](mydev, 2*n)
		require.NoError(t, err)
		defer into.Free()
		freed, err := resourceset.Alloc[float64](mydev, 2)
		require.NoError(t, err)
		freed.Free()
		root := sets[0].Devices()[0]
		calls := []struct {
			name string
			do   func(s *resourceset.DeviceSlice[float64]) error
		}{
			{"BcastDevice", func(s *resourceset.DeviceSlice[float64]) error { return resourceset.BcastDevice(ctx, root, s) }},
			{"ReduceDevice", func(s *resourceset.DeviceSlice[float64]) error {
				_, err := resourceset.ReduceDevice(ctx, root, s, good, comm.Sum)
				return err
			}},
			{"GatherDevice", func(s *resourceset.DeviceSlice[float64]) error {
				_, err := resourceset.GatherDevice(ctx, root, s, into)
				return err
			}},
			{"ScatterDevice", func(s *resourceset.DeviceSlice[float64]) error { return resourceset.ScatterDevice(ctx, root, into, s) }},
			{"AllReduceDevice", func(s *resourceset.DeviceSlice[float64]) error {
				return resourceset.AllReduceDevice(ctx, c, s, comm.Sum)
			}},
			{"AllGatherDevice", func(s *resourceset.DeviceSlice[float64]) error {
				return resourceset.AllGatherDevice(ctx, c, s, into)
			}},
		}
		for _, call := range calls {
			for _, bad := range []string{"nil", "freed"} {
				s := good
				if c.Rank() == badRank {
					s = nil
					if bad == "freed" {
						s = freed
					}
				}
				err := call.do(s)
				if c.Rank() == badRank {
					require.ErrorIs(t, err, resourceset.ErrInvalid, "%s with a %s slice on rank %d", call.name, bad, badRank)
				} else {
					require.ErrorIs(t, err, comm.ErrMismatch, "%s with a %s slice on rank %d", call.name, bad, badRank)
					require.ErrorContains(t, err, call.name+": rank 1's arguments are invalid")
				}
				// The ranks are in step: the next call works everywhere.
				require.NoError(t, resourceset.AllReduceDevice(ctx, c, good, comm.Sum), "after %s with a %s slice", call.name, bad)
			}
		}
		return nil
	})
	require.NoError(t, err)
}

// TestDevicesIsACopy: Devices handed out the resource set's own slice, so
// a caller that reordered or cleared the result (sorting devices by
// memory, say) changed every later Devices of that immutable set.
func TestDevicesIsACopy(t *testing.T) {
	err := local.Run(context.Background(), 1, func(ctx context.Context, c comm.Comm) error {
		_, machines := simMachines(t, ctx, c)
		rs, err := resourceset.New(c, 0, machines[0], nil)
		require.NoError(t, err)
		devs := rs.Devices()
		require.Len(t, devs, 1)
		devs[0] = nil
		require.NotNil(t, rs.Devices()[0], "Devices after its result was modified")
		return nil
	})
	require.NoError(t, err)
}
