package runtimeview

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"unsafe"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/resourceset"
	"github.com/pzgo/pz/scheduler"
)

// WithSimDevices gives every rank one simulated accelerator per argument
// (accel.Sim): device components of the rank's resource set
// (ResourceSet.Devices), described to the other ranks, and memory nodes
// of the rank's Scheduler. Environment, when the option is not given:
// PZ_NSIM=n devices with PZ_SIM_MEMORY bytes each (64MiB, 2GiB...).
func WithSimDevices(cfgs ...accel.SimConfig) Option {
	return func(c *config) { c.sims, c.simsSet = append(c.sims, cfgs...), true }
}

// simConfigs returns the simulated devices to open: the option's, or the
// environment's.
func simConfigs(cfg *config) ([]accel.SimConfig, error) {
	if cfg.simsSet {
		return cfg.sims, nil
	}
	v := cfg.getenv("PZ_NSIM")
	if v == "" || v == "0" {
		return nil, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%w: PZ_NSIM=%q is not a number of devices", ErrOption, v)
	}
	var sc accel.SimConfig
	if m := cfg.getenv("PZ_SIM_MEMORY"); m != "" {
		b, err := scheduler.ParseBytes(m)
		if err != nil || b <= 0 {
			return nil, fmt.Errorf("%w: PZ_SIM_MEMORY=%q is not a size (bytes, or 64MiB, 2GiB...)", ErrOption, m)
		}
		sc.Memory = b
	}
	out := make([]accel.SimConfig, n)
	for i := range out {
		out[i] = sc
	}
	return out, nil
}

// openDevices opens this rank's simulated devices and returns them with
// the machine description that lists them (a copy of m: in-process ranks
// share m).
func openDevices(cfg *config, m *hardware.Machine) ([]accel.Device, *hardware.Machine, error) {
	sims, err := simConfigs(cfg)
	if err != nil || len(sims) == 0 {
		return nil, m, err
	}
	mm := *m
	mm.Accelerators = append([]hardware.Accelerator(nil), m.Accelerators...)
	var devs []accel.Device
	for i, sc := range sims {
		d, err := accel.NewSim(len(mm.Accelerators), sc)
		if err != nil {
			return nil, nil, errors.Join(fmt.Errorf("runtimeview: simulated device %d: %w", i, err), closeDevices(devs))
		}
		devs = append(devs, d)
		mm.Accelerators = append(mm.Accelerators, hardware.Accelerator{Name: d.Name(), Kind: "sim", MemoryBytes: d.Capacity()})
	}
	return devs, &mm, nil
}

func closeDevices(devs []accel.Device) error {
	var errs []error
	for _, d := range devs {
		errs = append(errs, d.Close())
	}
	return errors.Join(errs...)
}

// AllReduceDevice combines every rank's buf element-wise with op, in
// place: every rank passes a slice of the same length on one of its
// devices (resourceset.Alloc). It takes the staging path in chunks of
// resourceset.StagingChunk bytes, the copies of one chunk overlapping the
// reduction of the next.
func AllReduceDevice[T comm.Number](ctx context.Context, rt *RuntimeView, buf *resourceset.DeviceSlice[T], op comm.Op) error {
	if buf == nil || !buf.Device().IsMine() {
		return fmt.Errorf("runtimeview: AllReduceDevice: %w: the slice must be on one of this rank's devices", ErrOption)
	}
	n := buf.Len()
	if err := agreeLen(ctx, rt.c, n); err != nil {
		return fmt.Errorf("runtimeview: AllReduceDevice: %w", err)
	}
	size := max(1, resourceset.StagingChunk/int(unsafe.Sizeof(*new(T))))
	host := [2][]T{make([]T, min(size, n)), make([]T, min(size, n))}
	var next <-chan error
	var outs []<-chan error
	var errs []error
	span := func(k int) (int, int) { return k * size, min((k+1)*size, n) }
	count := (n + size - 1) / size
	if count > 0 {
		lo, hi := span(0)
		next = buf.CopyOutAsync(lo, host[0][:hi-lo])
	}
	for k := 0; k < count; k++ {
		lo, hi := span(k)
		if err := <-next; err != nil {
			errs = append(errs, err)
		}
		if k+1 < count {
			lo1, hi1 := span(k + 1)
			next = buf.CopyOutAsync(lo1, host[(k+1)%2][:hi1-lo1])
		}
		r, err := comm.AllReduce(ctx, rt.c, host[k%2][:hi-lo], op)
		if err != nil {
			if k+1 < count {
				<-next
			}
			for _, o := range outs {
				<-o
			}
			return fmt.Errorf("runtimeview: AllReduceDevice: %w", err)
		}
		outs = append(outs, buf.CopyInAsync(lo, r))
	}
	for _, o := range outs {
		if err := <-o; err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("runtimeview: AllReduceDevice: %w", errors.Join(errs...))
	}
	return nil
}

// AllGatherDevice collects every rank's mine (lengths may differ) into
// every rank's into, in rank order; into holds the sum of the lengths.
func AllGatherDevice[T comm.Number](ctx context.Context, rt *RuntimeView, mine, into *resourceset.DeviceSlice[T]) error {
	if mine == nil || into == nil || !mine.Device().IsMine() || !into.Device().IsMine() {
		return fmt.Errorf("runtimeview: AllGatherDevice: %w: both slices must be on this rank's devices", ErrOption)
	}
	host := make([]T, mine.Len())
	if err := <-mine.CopyOutAsync(0, host); err != nil {
		return fmt.Errorf("runtimeview: AllGatherDevice: %w", err)
	}
	parts, err := comm.AllGather(ctx, rt.c, host)
	if err != nil {
		return fmt.Errorf("runtimeview: AllGatherDevice: %w", err)
	}
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	if total != into.Len() {
		return fmt.Errorf("runtimeview: AllGatherDevice: %w: the ranks sent %d elements, into holds %d", ErrOption, total, into.Len())
	}
	var outs []<-chan error
	off := 0
	for _, p := range parts {
		outs = append(outs, into.CopyInAsync(off, p))
		off += len(p)
	}
	var errs []error
	for _, o := range outs {
		if err := <-o; err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("runtimeview: AllGatherDevice: %w", errors.Join(errs...))
	}
	return nil
}

// agreeLen checks that every rank passes n.
func agreeLen(ctx context.Context, c comm.Comm, n int) error {
	r, err := comm.AllReduce(ctx, c, []int64{int64(n), -int64(n)}, comm.Max)
	if err != nil {
		return err
	}
	if r[0] != -r[1] {
		return fmt.Errorf("%w: lengths differ across ranks (from %d to %d elements; this rank %d)", comm.ErrMismatch, -r[1], r[0], n)
	}
	return nil
}
