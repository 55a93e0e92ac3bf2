package resourceset_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/resourceset"
)

// A devRoute gives every in-process rank a device (and the comm to use)
// such that the device collectives take one route: within one shared
// device, staging through host memory, on the devices (collSim, as
// NCCL), or by address (addrComm, as a CUDA-aware MPI). took counts the
// calls that went that way (copies within the device, collectives on the
// devices, calls by address); staging counts nothing.
type devRoute struct {
	name  string
	setup func(ctx context.Context, cm comm.Comm, shared *accel.Sim, h *hub, calls *atomic.Int64) (c comm.Comm, devs []*resourceset.Device, took func() int64, closeDev func(), err error)
}

var devRoutes = []devRoute{
	{"within one device", func(ctx context.Context, cm comm.Comm, shared *accel.Sim, _ *hub, _ *atomic.Int64) (comm.Comm, []*resourceset.Device, func() int64, func(), error) {
		devs, err := attach(ctx, cm, shared)
		took := func() int64 { _, _, w := shared.Copies(); return w }
		return cm, devs, took, func() {}, err
	}},
	{"staging", func(ctx context.Context, cm comm.Comm, _ *accel.Sim, _ *hub, _ *atomic.Int64) (comm.Comm, []*resourceset.Device, func() int64, func(), error) {
		sim, err := accel.NewSim(0, accel.SimConfig{Memory: 1 << 20})
		if err != nil {
			return nil, nil, nil, nil, err
		}
		devs, err := attach(ctx, cm, &stagedOnly{Device: sim})
		return cm, devs, func() int64 { return 0 }, func() { _ = sim.Close() }, err
	}},
	{"on the devices", func(ctx context.Context, cm comm.Comm, _ *accel.Sim, h *hub, _ *atomic.Int64) (comm.Comm, []*resourceset.Device, func() int64, func(), error) {
		cs, devs, err := ownCollSim(ctx, cm, h)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		took := func() int64 {
			n := 0
			for _, k := range cs.ranOnDevice() {
				n += k
			}
			return int64(n)
		}
		return cm, devs, took, func() { _ = cs.Close() }, nil
	}},
	{"by address", func(ctx context.Context, cm comm.Comm, _ *accel.Sim, _ *hub, calls *atomic.Int64) (comm.Comm, []*resourceset.Device, func() int64, func(), error) {
		c := addrComm{Comm: cm, calls: calls}
		sim, err := accel.NewSim(0, accel.SimConfig{Memory: 1 << 20, Addressable: true})
		if err != nil {
			return nil, nil, nil, nil, err
		}
		devs, err := attach(ctx, c, sim)
		return c, devs, calls.Load, func() { _ = sim.Close() }, err
	}},
}

// A routeSeen is what one rank saw of a call: its error (or none), and
// what its destination held afterwards (nil when it has none).
type routeSeen struct {
	err  string
	data []float64
}

// intoKind says what a rank passes as a gather's destination.
type intoKind int

const (
	intoTotal intoKind = iota // the ranks' total
	intoShort                 // one element less
	intoLong                  // one element more
	intoNil                   // nil
	intoFreed                 // a freed slice of the total
	intoMine                  // mine itself (in place)
)

// TestDeviceCollectiveRoutesAgree runs the same AllGatherDevice and
// GatherDevice calls - good and bad destinations, in place, lengths that
// differ, zero-length parts - over every route on three in-process ranks,
// and checks that every rank sees what docs/devices.md says whatever the
// route: AllGatherDevice's into is each rank's own (a wrong, nil or freed
// one fails that rank only, the others get the data), GatherDevice's
// root's into fails every rank, a destination that is the send slice
// itself gets the gathered data (in place), and the ranks stay in step.
func TestDeviceCollectiveRoutesAgree(t *testing.T) {
	const ranks = 3
	gathered := func(lens [ranks]int) []float64 {
		all := []float64{}
		for r, n := range lens {
			all = append(all, seq[float64](10*r+1, n)...)
		}
		return all
	}
	type tcase struct {
		name string
		all  bool // AllGatherDevice, else GatherDevice rooted at rank 1
		lens [ranks]int
		into [ranks]intoKind
		want func(r int) routeSeen // what rank r sees
	}
	ok := func(lens [ranks]int, all bool) func(int) routeSeen {
		return func(r int) routeSeen {
			if !all && r != 1 {
				return routeSeen{}
			}
			return routeSeen{data: gathered(lens)}
		}
	}
	// rank 1's into is bad: it alone fails (AllGatherDevice).
	ownFail := func(lens [ranks]int, msg string) func(int) routeSeen {
		return func(r int) routeSeen {
			if r == 1 {
				return routeSeen{err: msg}
			}
			return routeSeen{data: gathered(lens)}
		}
	}
	uneven := [ranks]int{1, 2, 3}
	cases := []tcase{
		{"AllGather/equal", true, [ranks]int{2, 2, 2}, [ranks]intoKind{}, ok([ranks]int{2, 2, 2}, true)},
		{"AllGather/uneven", true, uneven, [ranks]intoKind{}, ok(uneven, true)},
		{"AllGather/a rank sends nothing", true, [ranks]int{2, 0, 3}, [ranks]intoKind{}, ok([ranks]int{2, 0, 3}, true)},
		{"AllGather/nothing at all", true, [ranks]int{}, [ranks]intoKind{}, ok([ranks]int{}, true)},
		{"AllGather/into short on rank 1", true, uneven, [ranks]intoKind{1: intoShort}, ownFail(uneven, "the ranks sent 6 elements, the destination holds 5")},
		{"AllGather/into long on rank 1", true, uneven, [ranks]intoKind{1: intoLong}, ownFail(uneven, "the ranks sent 6 elements, the destination holds 7")},
		{"AllGather/into nil on rank 1", true, uneven, [ranks]intoKind{1: intoNil}, ownFail(uneven, "AllGatherDevice: into is nil, freed or on another rank's device")},
		{"AllGather/into freed on rank 1", true, uneven, [ranks]intoKind{1: intoFreed}, ownFail(uneven, "AllGatherDevice: into is nil, freed or on another rank's device")},
		{"AllGather/in place on rank 0", true, [ranks]int{4, 0, 0}, [ranks]intoKind{0: intoMine}, ok([ranks]int{4, 0, 0}, true)},
		{"AllGather/in place, nothing", true, [ranks]int{}, [ranks]intoKind{intoMine, intoMine, intoMine}, ok([ranks]int{}, true)},
		{"Gather/uneven", false, uneven, [ranks]intoKind{0: intoNil, 2: intoNil}, ok(uneven, false)},
		{"Gather/a rank sends nothing", false, [ranks]int{0, 2, 3}, [ranks]intoKind{0: intoNil, 2: intoNil}, ok([ranks]int{0, 2, 3}, false)},
		{"Gather/others' into ignored", false, uneven, [ranks]intoKind{0: intoFreed, 2: intoShort}, ok(uneven, false)},
		{"Gather/root's into short", false, uneven, [ranks]intoKind{0: intoNil, 1: intoShort, 2: intoNil}, func(int) routeSeen {
			return routeSeen{err: "the ranks send 6 elements, the root's destination holds 5"}
		}},
		{"Gather/root's into nil", false, uneven, [ranks]intoKind{intoNil, intoNil, intoNil}, func(r int) routeSeen {
			if r == 1 {
				return routeSeen{err: "GatherDevice with a nil or freed DeviceSlice"}
			}
			return routeSeen{err: "the root's arguments are invalid"}
		}},
		{"Gather/in place on the root", false, [ranks]int{0, 4, 0}, [ranks]intoKind{0: intoNil, 1: intoMine, 2: intoNil}, ok([ranks]int{0, 4, 0}, false)},
	}
	for _, rt := range devRoutes {
		for _, c := range cases {
			t.Run(rt.name+"/"+c.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				shared, err := accel.NewSim(0, accel.SimConfig{Memory: 1 << 20})
				require.NoError(t, err)
				defer shared.Close()
				h := &hub{}
				var calls atomic.Int64
				seen := make([]routeSeen, ranks)
				tookAny := make([]bool, ranks)
				err = local.Run(ctx, ranks, func(ctx context.Context, cm comm.Comm) error {
					r := cm.Rank()
					c2, devs, took, closeDev, err := rt.setup(ctx, cm, shared, h, &calls)
					if err != nil {
						return err
					}
					defer closeDev()
					mine, err := filled(ctx, devs[r], seq[float64](10*r+1, c.lens[r]))
					if err != nil {
						return err
					}
					defer mine.Free()
					total := 0
					for _, n := range c.lens {
						total += n
					}
					var into *resourceset.DeviceSlice[float64]
					alloc := func(n int) error {
						var err error
						if into, err = resourceset.Alloc[float64](devs[r], n); err == nil {
							err = into.CopyFrom(ctx, make([]float64, n))
						}
						return err
					}
					switch c.into[r] {
					case intoTotal, intoFreed:
						err = alloc(total)
					case intoShort:
						err = alloc(total - 1)
					case intoLong:
						err = alloc(total + 1)
					case intoMine:
						into = mine
					}
					if err != nil {
						return err
					}
					if into != nil && into != mine {
						if c.into[r] == intoFreed {
							into.Free()
						} else {
							defer into.Free()
						}
					}
					before := took()
					if c.all {
						err = resourceset.AllGatherDevice(ctx, c2, mine, into)
					} else {
						_, err = resourceset.GatherDevice(ctx, devs[1], mine, into)
					}
					tookAny[r] = took() > before
					if err != nil {
						seen[r].err = err.Error()
					} else if c.all || r == 1 {
						if seen[r].data, err = contents(ctx, into); err != nil {
							return err
						}
					}
					// In step: the next collective succeeds everywhere.
					b, err := filled(ctx, devs[r], seq[float64](10*r, 2))
					if err != nil {
						return err
					}
					defer b.Free()
					return inStep(ctx, r, c.name, devs, b)
				})
				require.NoError(t, err, "the ranks are not in step after the call")
				for r := range ranks {
					want := c.want(r)
					if want.err == "" {
						require.Empty(t, seen[r].err, "rank %d", r)
						if want.data == nil {
							require.Nil(t, seen[r].data, "rank %d", r)
						} else {
							require.Equal(t, want.data, append([]float64{}, seen[r].data...), "rank %d's destination", r)
						}
					} else {
						require.True(t, strings.Contains(seen[r].err, want.err), "rank %d: error %q, want one saying %q", r, seen[r].err, want.err)
					}
				}
				// Good calls of more than nothing take the route.
				if rt.name != "staging" && c.want(0).err == "" && c.want(1).err == "" && c.want(2).err == "" && !slices.Equal(c.lens[:], []int{0, 0, 0}) && !slices.Contains(c.into[:], intoMine) {
					require.True(t, slices.Contains(tookAny, true), "no rank's call took the %s route", rt.name)
				}
			})
		}
	}
}

// TestDeviceCollectiveRoutesEmpty: BcastDevice, ScatterDevice,
// ReduceDevice and AllReduceDevice of zero elements succeed on every
// route, as a gather's empty parts do (within one device they failed:
// an empty allocation has no memory to copy within).
func TestDeviceCollectiveRoutesEmpty(t *testing.T) {
	const ranks = 3
	for _, rt := range devRoutes {
		t.Run(rt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			shared, err := accel.NewSim(0, accel.SimConfig{Memory: 1 << 20})
			require.NoError(t, err)
			defer shared.Close()
			h := &hub{}
			var calls atomic.Int64
			err = local.Run(ctx, ranks, func(ctx context.Context, cm comm.Comm) error {
				r := cm.Rank()
				c2, devs, _, closeDev, err := rt.setup(ctx, cm, shared, h, &calls)
				if err != nil {
					return err
				}
				defer closeDev()
				empty, err := resourceset.Alloc[float64](devs[r], 0)
				if err != nil {
					return err
				}
				defer empty.Free()
				if err := resourceset.BcastDevice(ctx, devs[1], empty); err != nil {
					return fmt.Errorf("rank %d: BcastDevice: %w", r, err)
				}
				if err := resourceset.ScatterDevice(ctx, devs[1], empty, empty); err != nil {
					return fmt.Errorf("rank %d: ScatterDevice: %w", r, err)
				}
				if _, err := resourceset.ReduceDevice(ctx, devs[1], empty, empty, comm.Sum); err != nil {
					return fmt.Errorf("rank %d: ReduceDevice: %w", r, err)
				}
				if err := resourceset.AllReduceDevice(ctx, c2, empty, comm.Sum); err != nil {
					return fmt.Errorf("rank %d: AllReduceDevice: %w", r, err)
				}
				return nil
			})
			require.NoError(t, err)
		})
	}
}
