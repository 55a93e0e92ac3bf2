package resourceset_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/resourceset"
)

// addrComm is an in-process comm that reaches host-space device memory
// by address (comm.DeviceComm), as a CUDA-aware MPI reaches a CUDA GPU's:
// its collectives read and write float64s at the addresses of
// accel.SimConfig{Addressable: true} devices, around the host
// collectives of the comm it wraps. It counts the calls that took an
// address in calls.
type addrComm struct {
	comm.Comm
	calls *atomic.Int64
}

func (c addrComm) Reaches(space string) bool { return space == "host" }

// at is the n float64s at address a (nil for none).
func at(a uintptr, n int) []float64 {
	if a == 0 || n == 0 {
		return nil
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(&a)) // a is mapped memory, outside Go's heap
	return unsafe.Slice((*float64)(p), n)
}

func (c addrComm) float64s(dt comm.Datatype) error {
	c.calls.Add(1)
	if dt != comm.DatatypeOf[float64]() {
		return errors.New("addrComm knows float64 only")
	}
	return nil
}

func (c addrComm) BcastAt(ctx context.Context, a uintptr, count int, dt comm.Datatype, root int) error {
	if err := c.float64s(dt); err != nil {
		return err
	}
	return comm.Bcast(ctx, c.Comm, at(a, count), root)
}

func (c addrComm) AllReduceAt(ctx context.Context, send, recv uintptr, count int, dt comm.Datatype, op comm.Op) error {
	if err := c.float64s(dt); err != nil {
		return err
	}
	got, err := comm.AllReduce(ctx, c.Comm, at(send, count), op)
	copy(at(recv, count), got)
	return err
}

func (c addrComm) GatherAt(ctx context.Context, send uintptr, counts []int, recv uintptr, dt comm.Datatype, root int) error {
	if err := c.float64s(dt); err != nil {
		return err
	}
	var overlap error
	if c.Rank() == root {
		total := 0
		for _, n := range counts {
			total += n
		}
		overlap = overlaps(send, counts[c.Rank()], recv, total)
	}
	parts, err := comm.Gather(ctx, c.Comm, at(send, counts[c.Rank()]), root)
	if err != nil || overlap != nil {
		return errors.Join(err, overlap)
	}
	all := slices.Concat(parts...)
	copy(at(recv, len(all)), all)
	return nil
}

func (c addrComm) ReduceAt(ctx context.Context, send, recv uintptr, count int, dt comm.Datatype, op comm.Op, root int) error {
	if err := c.float64s(dt); err != nil {
		return err
	}
	got, err := comm.Reduce(ctx, c.Comm, at(send, count), op, root)
	if c.Rank() == root {
		copy(at(recv, count), got)
	}
	return err
}

func (c addrComm) ScatterAt(ctx context.Context, send uintptr, counts []int, recv uintptr, dt comm.Datatype, root int) error {
	if err := c.float64s(dt); err != nil {
		return err
	}
	var parts [][]float64
	var overlap error
	if c.Rank() == root {
		total := 0
		for _, n := range counts {
			total += n
		}
		all := at(send, total)
		overlap = overlaps(recv, counts[c.Rank()], send, total)
		for _, n := range counts {
			parts, all = append(parts, all[:n:n]), all[n:]
		}
	}
	part, err := comm.Scatter(ctx, c.Comm, parts, root)
	if err != nil || overlap != nil {
		return errors.Join(err, overlap)
	}
	copy(at(recv, counts[c.Rank()]), part)
	return nil
}

func (c addrComm) AllGatherAt(ctx context.Context, send uintptr, counts []int, recv uintptr, dt comm.Datatype) error {
	if err := c.float64s(dt); err != nil {
		return err
	}
	total := 0
	for _, n := range counts {
		total += n
	}
	// As MPI, which takes no aliased buffers there: this rank still
	// takes part (the others wait for it), writes nothing and fails.
	overlap := overlaps(send, counts[c.Rank()], recv, total)
	parts, err := comm.AllGather(ctx, c.Comm, at(send, counts[c.Rank()]))
	if err != nil || overlap != nil {
		return errors.Join(err, overlap)
	}
	copy(at(recv, total), slices.Concat(parts...))
	return nil
}

// overlaps refuses n and m float64s at a and b that share memory, as
// MPI refuses a send and a receive buffer that overlap.
func overlaps(a uintptr, n int, b uintptr, m int) error {
	if n > 0 && m > 0 && a < b+uintptr(8*m) && b < a+uintptr(8*n) {
		return fmt.Errorf("addrComm: send %#x and recv %#x overlap", a, b)
	}
	return nil
}

// noAddress is an addressable device whose Address fails.
type noAddress struct{ *accel.Sim }

func (noAddress) Address(accel.Mem, int) (uintptr, error) {
	return 0, errors.New("no address for this memory")
}

// TestByAddressAddressFailureStages checks that a rank whose device
// cannot give its memory's address does not leave the by-address route
// alone while the others wait in the comm's collective: every rank
// stages instead, with the data right, and no collective takes an
// address. With no failure, the same calls take the route.
func TestByAddressAddressFailureStages(t *testing.T) {
	const ranks, m = 3, 4
	for _, fails := range []int{-1, 0, 1} { // the rank whose Address fails; -1: none
		t.Run(fmt.Sprint("fails on rank ", fails), func(t *testing.T) {
			ctx := context.Background()
			var calls atomic.Int64
			err := local.Run(ctx, ranks, func(ctx context.Context, cm comm.Comm) error {
				r := cm.Rank()
				c := addrComm{Comm: cm, calls: &calls}
				sim, err := accel.NewSim(0, accel.SimConfig{Memory: 1 << 20, Addressable: true})
				if err != nil {
					return err
				}
				defer sim.Close()
				var dev accel.Device = sim
				if r == fails {
					dev = noAddress{sim}
				}
				devs, err := attach(ctx, c, dev)
				if err != nil {
					return err
				}
				check := func(what string, got, want any) error {
					if !reflect.DeepEqual(got, want) {
						return fmt.Errorf("rank %d: %s: %v, want %v", r, what, got, want)
					}
					return nil
				}

				// AllReduceDevice (send and recv by address).
				buf, err := filled(ctx, devs[r], seq[float64](10*r, m))
				if err != nil {
					return err
				}
				defer buf.Free()
				if err := resourceset.AllReduceDevice(ctx, c, buf, comm.Sum); err != nil {
					return fmt.Errorf("rank %d: AllReduceDevice: %w", r, err)
				}
				want := make([]float64, m)
				for q := range ranks {
					for i, v := range seq[float64](10*q, m) {
						want[i] += v
					}
				}
				if got, err := contents(ctx, buf); err != nil {
					return err
				} else if err := check("AllReduceDevice", got, want); err != nil {
					return err
				}

				// BcastDevice (one address), rooted at rank 0's device.
				x := make([]float64, m)
				if r == 0 {
					x = seq[float64](100, m)
				}
				b, err := filled(ctx, devs[r], x)
				if err != nil {
					return err
				}
				defer b.Free()
				if err := resourceset.BcastDevice(ctx, devs[0], b); err != nil {
					return fmt.Errorf("rank %d: BcastDevice: %w", r, err)
				}
				if got, err := contents(ctx, b); err != nil {
					return err
				} else if err := check("BcastDevice", got, seq[float64](100, m)); err != nil {
					return err
				}

				// GatherDevice (the root's destination by address),
				// rooted at rank 0's device.
				mine, err := filled(ctx, devs[r], seq[float64](10*r, r+1))
				if err != nil {
					return err
				}
				defer mine.Free()
				var into *resourceset.DeviceSlice[float64]
				if r == 0 {
					if into, err = resourceset.Alloc[float64](devs[0], 1+2+3); err != nil {
						return err
					}
					defer into.Free()
				}
				ok, err := resourceset.GatherDevice(ctx, devs[0], mine, into)
				if err != nil {
					return fmt.Errorf("rank %d: GatherDevice: %w", r, err)
				}
				if err := check("GatherDevice's ok", ok, r == 0); err != nil {
					return err
				}
				if r == 0 {
					var all []float64
					for q := range ranks {
						all = append(all, seq[float64](10*q, q+1)...)
					}
					if got, err := contents(ctx, into); err != nil {
						return err
					} else if err := check("GatherDevice", got, all); err != nil {
						return err
					}
				}
				return nil
			})
			require.NoError(t, err)
			if fails < 0 {
				require.Equal(t, int64(3*ranks), calls.Load(), "with no failure, every rank takes the by-address route in the three calls")
			} else {
				require.Zero(t, calls.Load(), "a rank without addresses makes every rank stage")
			}
		})
	}
}
