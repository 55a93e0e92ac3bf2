package resourceset

import (
	"context"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/hardware/accel"
)

// A Device is one accelerator of a rank as a component of the rank's
// resource set: on its own rank it owns device buffers (Alloc), and on
// every rank it is the root of the device forms of the rooted collectives
// (BcastDevice, GatherDevice, ReduceDevice, ScatterDevice), whose root
// data live in its memory. Like the RAM, it can be asked for from any
// rank; only its own rank can reach its memory.
type Device struct {
	c    comm.Comm
	rank int
	idx  int
	info hardware.Accelerator
	dev  accel.Device // nil on other ranks

	directs directs // communicators of direct collectives (device_nccl.go)
}

var _ Root = (*Device)(nil)

// Comm returns the communicator of the device's rank.
func (d *Device) Comm() comm.Comm { return d.c }

// Rank returns the rank whose device it is.
func (d *Device) Rank() int { return d.rank }

// Index returns the device's index among its rank's devices.
func (d *Device) Index() int { return d.idx }

// Name returns the device's name on its rank, e.g. "sim0".
func (d *Device) Name() string { return d.info.Name }

// Kind returns "sim" for a simulated device.
func (d *Device) Kind() string { return d.info.Kind }

// MemoryBytes returns the device's memory.
func (d *Device) MemoryBytes() int64 { return d.info.MemoryBytes }

// IsMine reports whether the device belongs to the calling rank.
func (d *Device) IsMine() bool { return d.rank == d.c.Rank() }

// Accel returns the device itself on its own rank, nil on others.
func (d *Device) Accel() accel.Device { return d.dev }

// String names the device and its rank.
func (d *Device) String() string {
	return fmt.Sprintf("device %s (%d) of rank %d", d.info.Name, d.idx, d.rank)
}

// Devices returns the rank's device components, in the order of its
// hardware description's accelerators; empty when it has none (a rank
// whose GPUs were not opened, with runtimeview.WithCUDA or PZ_NCUDA, has
// none here even though GPUs lists them). The slice is a copy, as GPUs'
// is: the resource set is immutable.
func (rs *ResourceSet) Devices() []*Device { return slices.Clone(rs.devs) }

// AttachDevices gives the calling rank's resource set the devices its
// description lists, in the same order, so that they own buffers and
// move data (the runtime does it for the devices it opens). It fails for
// another rank's resource set or devices that do not match the
// description.
func (rs *ResourceSet) AttachDevices(devs []accel.Device) error {
	if !rs.IsMine() {
		return fmt.Errorf("%w: AttachDevices on rank %d's resource set from rank %d", ErrInvalid, rs.rank, rs.c.Rank())
	}
	if len(devs) != len(rs.devs) {
		return fmt.Errorf("%w: %d devices attached to a description of %d", ErrInvalid, len(devs), len(rs.devs))
	}
	for i, d := range devs {
		if d == nil || d.Name() != rs.devs[i].info.Name {
			return fmt.Errorf("%w: device %d is not %q", ErrInvalid, i, rs.devs[i].info.Name)
		}
	}
	for i, d := range devs {
		rs.devs[i].dev = d
	}
	return nil
}

// A DeviceSlice is n elements of T in one device's memory, on the
// device's rank. It is not safe for concurrent use.
type DeviceSlice[T comm.Number] struct {
	dev *Device
	mem accel.Mem
	n   int
}

// Alloc allocates n elements of T on d, which must be the calling rank's.
// When they do not fit, the device first asks the holders of its memory
// (the rank's scheduler: accel.Reclaimer) to give back what they keep
// there without needing it - cached allocations, and the replicas of
// data that no task or copy uses, least recently used first, a modified
// one after the scheduler has written it back to RAM (Alloc waits for
// those copies) - and retries; the error then wraps accel.ErrOutOfMemory
// and names what they still hold (data that running tasks use) and what
// frees it.
func Alloc[T comm.Number](d *Device, n int) (*DeviceSlice[T], error) {
	if d == nil || d.dev == nil {
		return nil, fmt.Errorf("%w: Alloc on %v, which is not this rank's (rank %d) or not attached", ErrInvalid, d, d.c.Rank())
	}
	if n < 0 {
		return nil, fmt.Errorf("%w: Alloc of %d elements on %v", ErrInvalid, n, d)
	}
	var zero T
	m, err := d.dev.Alloc(n * int(unsafe.Sizeof(zero)))
	if err != nil {
		return nil, fmt.Errorf("resourceset: Alloc on %v: %w", d, err)
	}
	return &DeviceSlice[T]{dev: d, mem: m, n: n}, nil
}

// Len returns the number of elements.
func (s *DeviceSlice[T]) Len() int { return s.n }

// Device returns the device that holds the slice.
func (s *DeviceSlice[T]) Device() *Device { return s.dev }

// Mem returns the slice's allocation, for code that drives the device
// itself (Device().Accel()'s copies); nil once freed.
func (s *DeviceSlice[T]) Mem() accel.Mem { return s.mem }

// Free releases the slice's memory; it must not be used afterwards.
func (s *DeviceSlice[T]) Free() {
	if s.mem != nil {
		s.dev.dev.Free(s.mem)
		s.mem = nil
	}
}

// CopyFrom copies src (len(src) == Len()) into the slice. It checks ctx
// before the copy starts; a started copy runs to its end, since the
// device reads src until then.
func (s *DeviceSlice[T]) CopyFrom(ctx context.Context, src []T) error {
	return s.copySync(ctx, "CopyFrom", len(src), func() <-chan error { return s.CopyInAsync(0, src) })
}

// CopyTo copies the slice into dst (len(dst) == Len()), like CopyFrom.
func (s *DeviceSlice[T]) CopyTo(ctx context.Context, dst []T) error {
	return s.copySync(ctx, "CopyTo", len(dst), func() <-chan error { return s.CopyOutAsync(0, dst) })
}

// copySync checks a whole-slice copy of n elements, starts it and waits.
func (s *DeviceSlice[T]) copySync(ctx context.Context, call string, n int, start func() <-chan error) error {
	if err := s.check(call, n); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("resourceset: %s %v: %w", call, s.dev, err)
	}
	if err := <-start(); err != nil {
		return fmt.Errorf("resourceset: %s %v: %w", call, s.dev, err)
	}
	return nil
}

func (s *DeviceSlice[T]) check(call string, n int) error {
	if err := s.checkRange(call, 0, 0); err != nil {
		return err // nil or freed
	}
	if n != s.n {
		return fmt.Errorf("%w: %s of %d elements on a DeviceSlice of %d on %v", ErrInvalid, call, n, s.n, s.dev)
	}
	return nil
}

// checkRange checks a copy of n elements at off: inside the slice, on a
// slice not freed.
func (s *DeviceSlice[T]) checkRange(call string, off, n int) error {
	if s == nil || s.mem == nil {
		return fmt.Errorf("%w: %s on a nil or freed DeviceSlice", ErrInvalid, call)
	}
	if off < 0 || off > s.n || n > s.n-off {
		return fmt.Errorf("%w: %s of %d elements at offset %d on a DeviceSlice of %d on %v: past its end (want 0 <= offset, offset + elements <= %d)", ErrInvalid, call, n, off, s.n, s.dev, s.n)
	}
	return nil
}

// CopyInAsync starts copying host into elements [off, off+len(host)) and
// returns the channel that receives the copy's error when it ends; host
// must not change until then. A range outside the slice, or a freed
// slice, is an error wrapping ErrInvalid on the channel, and nothing is
// copied.
func (s *DeviceSlice[T]) CopyInAsync(off int, host []T) <-chan error {
	return s.copyAsync("CopyInAsync", off, host, func(b []byte, done func(time.Time, error)) {
		s.dev.dev.CopyIn(s.mem, off*elemSize[T](), b, 1, len(b), len(b), done)
	})
}

// CopyOutAsync starts copying elements [off, off+len(host)) into host,
// like CopyInAsync.
func (s *DeviceSlice[T]) CopyOutAsync(off int, host []T) <-chan error {
	return s.copyAsync("CopyOutAsync", off, host, func(b []byte, done func(time.Time, error)) {
		s.dev.dev.CopyOut(b, 1, len(b), len(b), s.mem, off*elemSize[T](), done)
	})
}

// copyAsync is CopyInAsync and CopyOutAsync (call): it checks the range
// of host at off, then starts the copy of host's bytes (start), which
// calls done when it ends. An error of the check, or the end of a copy
// of nothing, is on the returned channel at once.
func (s *DeviceSlice[T]) copyAsync(call string, off int, host []T, start func(b []byte, done func(time.Time, error))) <-chan error {
	ch := make(chan error, 1)
	if err := s.checkRange(call, off, len(host)); err != nil {
		ch <- err
		return ch
	}
	b := bytesOf(host)
	if len(b) == 0 {
		ch <- nil
		return ch
	}
	start(b, func(_ time.Time, err error) { ch <- err })
	return ch
}

func elemSize[T comm.Number]() int {
	var zero T
	return int(unsafe.Sizeof(zero))
}

// bytesOf views a numeric slice as its bytes.
func bytesOf[T comm.Number](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*elemSize[T]())
}
