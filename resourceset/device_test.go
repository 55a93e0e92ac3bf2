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
