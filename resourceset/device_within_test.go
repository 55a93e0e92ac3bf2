package resourceset_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/resourceset"
)

// failingCopies is one rank's view of a simulated device that in-process
// ranks share: each rank has its own, over the same *accel.Sim (so the
// ranks take the within-one-device route), and the copies within the
// device that this rank issues end with fail while it is set. Only its
// rank's goroutine sets fail and issues copies.
type failingCopies struct {
	*accel.Sim
	fail error
}

func (d *failingCopies) CopyWithin(dst accel.Mem, doff int, src accel.Mem, soff int, n int, done accel.Done) {
	if d.fail != nil {
		err := d.fail
		go done(time.Now(), err)
		return
	}
	d.Sim.CopyWithin(dst, doff, src, soff, n, done)
}

// TestWithinCopyFailureFailsEveryRank: in-process ranks sharing one
// device broadcast, gather, scatter and all-gather by copies within it;
// when one rank's copy fails, every rank returns an error (the failing
// rank its own, the others one naming that rank and its error), and the
// ranks stay in step: the next collective succeeds on every rank.
func TestWithinCopyFailureFailsEveryRank(t *testing.T) {
	const ranks, m = 3, 4
	for _, c := range []struct {
		call  string
		fails int // the rank whose copies fail
		run   func(ctx context.Context, devs []*resourceset.Device, cm comm.Comm, mine *resourceset.DeviceSlice[int32]) error
	}{
		{"BcastDevice", 1, func(ctx context.Context, devs []*resourceset.Device, cm comm.Comm, mine *resourceset.DeviceSlice[int32]) error {
			return resourceset.BcastDevice(ctx, devs[0], mine)
		}},
		{"GatherDevice", 1, func(ctx context.Context, devs []*resourceset.Device, cm comm.Comm, mine *resourceset.DeviceSlice[int32]) error {
			var into *resourceset.DeviceSlice[int32]
			if cm.Rank() == 1 { // the root
				var err error
				if into, err = resourceset.Alloc[int32](devs[1], ranks*m); err != nil {
					return err
				}
				defer into.Free()
			}
			_, err := resourceset.GatherDevice(ctx, devs[1], mine, into)
			return err
		}},
		{"ScatterDevice", 2, func(ctx context.Context, devs []*resourceset.Device, cm comm.Comm, mine *resourceset.DeviceSlice[int32]) error {
			var from *resourceset.DeviceSlice[int32]
			if cm.Rank() == 0 { // the root
				var err error
				if from, err = filled(ctx, devs[0], seq[int32](0, ranks*m)); err != nil {
					return err
				}
				defer from.Free()
			}
			return resourceset.ScatterDevice(ctx, devs[0], from, mine)
		}},
		{"AllGatherDevice", 0, func(ctx context.Context, devs []*resourceset.Device, cm comm.Comm, mine *resourceset.DeviceSlice[int32]) error {
			into, err := resourceset.Alloc[int32](devs[cm.Rank()], ranks*m)
			if err != nil {
				return err
			}
			defer into.Free()
			return resourceset.AllGatherDevice(ctx, cm, mine, into)
		}},
	} {
		t.Run(c.call, func(t *testing.T) {
			ctx := context.Background()
			sim, err := accel.NewSim(0, accel.SimConfig{Memory: 1 << 20})
			require.NoError(t, err)
			defer sim.Close()
			boom := errors.New("copy engine fault")
			err = local.Run(ctx, ranks, func(ctx context.Context, cm comm.Comm) error {
				r := cm.Rank()
				dev := &failingCopies{Sim: sim}
				devs, err := attach(ctx, cm, dev)
				if err != nil {
					return err
				}
				mine, err := filled(ctx, devs[r], seq[int32](10*r, m))
				if err != nil {
					return err
				}
				defer mine.Free()
				_, _, within0 := sim.Copies()
				if r == c.fails {
					dev.fail = boom
				}
				err = c.run(ctx, devs, cm, mine)
				dev.fail = nil
				if err := failedEverywhere(r, c.call, c.fails, withinCopyFailed, err, boom); err != nil {
					return err
				}
				// Every rank is past the failed call: the next collective
				// runs within the device on every rank, and succeeds.
				if err := inStep(ctx, r, c.call, devs, mine); err != nil {
					return err
				}
				if _, _, within1 := sim.Copies(); within1 == within0 {
					return fmt.Errorf("rank %d: nothing was copied within the device", r)
				}
				return nil
			})
			require.NoError(t, err)
		})
	}
}

// stagedOnly is a rank's own simulated device seen through accel.Device
// alone (no Sharer, Collectives or Addresser): the device collectives
// take the staging path through host memory. Its copies out of the
// device end with fail while it is set (only its rank's goroutine sets
// it and copies).
type stagedOnly struct {
	accel.Device
	fail error
}

func (d *stagedOnly) CopyOut(dst []byte, rows, width, pitch int, src accel.Mem, off int, done accel.Done) {
	if d.fail != nil {
		err := d.fail
		go done(time.Now(), err)
		return
	}
	d.Device.CopyOut(dst, rows, width, pitch, src, off, done)
}

// TestScatterStagingRootCopyFailsEveryRank: when the root's copy out of
// from fails on ScatterDevice's staging path, the others still receive
// its parts (the collective must end) but not as data: every rank
// returns an error naming the root's failure, and no rank's slice is
// written with the zeros the root sent (they got nil and zeros before).
func TestScatterStagingRootCopyFailsEveryRank(t *testing.T) {
	const ranks, m, root = 3, 4, 1
	boom := errors.New("copy engine fault")
	err := local.Run(context.Background(), ranks, func(ctx context.Context, cm comm.Comm) error {
		r := cm.Rank()
		sim, err := accel.NewSim(0, accel.SimConfig{Memory: 1 << 20})
		if err != nil {
			return err
		}
		defer sim.Close()
		dev := &stagedOnly{Device: sim}
		devs, err := attach(ctx, cm, dev)
		if err != nil {
			return err
		}
		mine, err := filled(ctx, devs[r], seq[int32](100+10*r, m))
		if err != nil {
			return err
		}
		defer mine.Free()
		var from *resourceset.DeviceSlice[int32]
		if r == root {
			if from, err = filled(ctx, devs[r], seq[int32](0, ranks*m)); err != nil {
				return err
			}
			defer from.Free()
			dev.fail = boom
		}
		err = resourceset.ScatterDevice(ctx, devs[root], from, mine)
		dev.fail = nil
		switch {
		case err == nil:
			return fmt.Errorf("rank %d: ScatterDevice returned nil; the root's copy out of from failed", r)
		case r == root && !errors.Is(err, boom):
			return fmt.Errorf("rank %d (root): not its copy's error: %v", r, err)
		case r != root && !strings.Contains(err.Error(), fmt.Sprintf("the root's copy out of the device failed on rank %d: ", root)+boom.Error()):
			return fmt.Errorf("rank %d: the error does not name the root's failure: %v", r, err)
		}
		got, err := contents(ctx, mine)
		if err != nil {
			return err
		}
		if want := seq[int32](100+10*r, m); !slices.Equal(got, want) {
			return fmt.Errorf("rank %d: mine holds %v after the failed scatter, want it untouched %v", r, got, want)
		}
		// In step: the next scatter succeeds everywhere.
		if err := resourceset.ScatterDevice(ctx, devs[root], from, mine); err != nil {
			return fmt.Errorf("rank %d: ScatterDevice after the failed one: %w", r, err)
		}
		if got, err = contents(ctx, mine); err != nil {
			return err
		}
		if want := seq[int32](r*m, m); !slices.Equal(got, want) {
			return fmt.Errorf("rank %d: ScatterDevice gave %v, want %v", r, got, want)
		}
		return nil
	})
	require.NoError(t, err)
}

// TestStagingCopyOutFailsEveryRank: on the staging path, when one rank's
// copy out of its device fails, the data the others receive depend on
// it: every rank returns an error (the failing rank its own, the others
// one naming it), none hangs, and the ranks stay in step (the next
// collective succeeds everywhere). Before, BcastDevice's, ReduceDevice's
// and AllReduceDevice's others returned nil with wrong data, and
// GatherDevice's and AllGatherDevice's failing rank returned before the
// collective, leaving the others waiting for it.
func TestStagingCopyOutFailsEveryRank(t *testing.T) {
	const ranks, m = 3, 4
	for _, c := range []struct {
		call, part string
		fails      int
		run        func(ctx context.Context, devs []*resourceset.Device, cm comm.Comm, mine *resourceset.DeviceSlice[int32]) error
	}{
		{"BcastDevice", "the root's copy out of the device", 1, func(ctx context.Context, devs []*resourceset.Device, cm comm.Comm, mine *resourceset.DeviceSlice[int32]) error {
			return resourceset.BcastDevice(ctx, devs[1], mine)
		}},
		{"ReduceDevice", "the copy out of the device", 2, func(ctx context.Context, devs []*resourceset.Device, cm comm.Comm, mine *resourceset.DeviceSlice[int32]) error {
			into, err := resourceset.Alloc[int32](devs[cm.Rank()], m)
			if err != nil {
				return err
			}
			defer into.Free()
			_, err = resourceset.ReduceDevice(ctx, devs[0], mine, into, comm.Sum)
			return err
		}},
		{"AllReduceDevice", "the copy out of the device", 0, func(ctx context.Context, devs []*resourceset.Device, cm comm.Comm, mine *resourceset.DeviceSlice[int32]) error {
			return resourceset.AllReduceDevice(ctx, cm, mine, comm.Sum)
		}},
		{"GatherDevice", "the copy out of the device", 2, func(ctx context.Context, devs []*resourceset.Device, cm comm.Comm, mine *resourceset.DeviceSlice[int32]) error {
			into, err := resourceset.Alloc[int32](devs[cm.Rank()], ranks*m)
			if err != nil {
				return err
			}
			defer into.Free()
			_, err = resourceset.GatherDevice(ctx, devs[0], mine, into)
			return err
		}},
		{"AllGatherDevice", "the copy out of the device", 1, func(ctx context.Context, devs []*resourceset.Device, cm comm.Comm, mine *resourceset.DeviceSlice[int32]) error {
			into, err := resourceset.Alloc[int32](devs[cm.Rank()], ranks*m)
			if err != nil {
				return err
			}
			defer into.Free()
			return resourceset.AllGatherDevice(ctx, cm, mine, into)
		}},
	} {
		t.Run(c.call, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			boom := errors.New("copy engine fault")
			err := local.Run(ctx, ranks, func(ctx context.Context, cm comm.Comm) error {
				r := cm.Rank()
				sim, err := accel.NewSim(0, accel.SimConfig{Memory: 1 << 20})
				if err != nil {
					return err
				}
				defer sim.Close()
				dev := &stagedOnly{Device: sim}
				devs, err := attach(ctx, cm, dev)
				if err != nil {
					return err
				}
				mine, err := filled(ctx, devs[r], seq[int32](10*r, m))
				if err != nil {
					return err
				}
				defer mine.Free()
				if r == c.fails {
					dev.fail = boom
				}
				err = c.run(ctx, devs, cm, mine)
				dev.fail = nil
				if err := failedEverywhere(r, c.call, c.fails, c.part+" failed on rank %d: ", err, boom); err != nil {
					return err
				}
				// In step: the next collective succeeds everywhere.
				return inStep(ctx, r, c.call, devs, mine)
			})
			require.NoError(t, err)
		})
	}
}

// withinCopyFailed is what the ranks whose copies succeeded say of the
// failing rank (its number for %d) on the within-one-device route.
const withinCopyFailed = "the copy within the device failed on rank %d: "

// failedEverywhere checks rank r's error err from call, of which rank
// fails's part failed with boom: the failing rank returns boom, every
// other rank an error naming call and saying others (a format of the
// failing rank's number) followed by boom's text.
func failedEverywhere(r int, call string, fails int, others string, err, boom error) error {
	switch {
	case err == nil:
		return fmt.Errorf("rank %d: %s returned nil; it failed on rank %d", r, call, fails)
	case !strings.Contains(err.Error(), call):
		return fmt.Errorf("rank %d: the error does not name %s: %v", r, call, err)
	case r == fails && !errors.Is(err, boom):
		return fmt.Errorf("rank %d: not its own error: %v", r, err)
	case r != fails && !strings.Contains(err.Error(), fmt.Sprintf(others, fails)+boom.Error()):
		return fmt.Errorf("rank %d: the error does not name rank %d and its error: %v", r, fails, err)
	}
	return nil
}

// inStep checks that the ranks are in step after a failed call: with
// mine refilled, a BcastDevice rooted at rank 2 gives every rank rank
// 2's values.
func inStep[T real](ctx context.Context, r int, call string, devs []*resourceset.Device, mine *resourceset.DeviceSlice[T]) error {
	m := mine.Len()
	if err := mine.CopyFrom(ctx, seq[T](10*r, m)); err != nil {
		return err
	}
	if err := resourceset.BcastDevice(ctx, devs[2], mine); err != nil {
		return fmt.Errorf("rank %d: BcastDevice after the failed %s: %w", r, call, err)
	}
	got, err := contents(ctx, mine)
	if err != nil {
		return err
	}
	if want := seq[T](20, m); !slices.Equal(got, want) {
		return fmt.Errorf("rank %d: BcastDevice gave %v, want %v", r, got, want)
	}
	return nil
}
