package runtimeview

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/hardware/cuda"
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

// WithSharedSimDevices is WithSimDevices for the in-process ranks of
// RunLocal (and Run with PZ_RANKS) sharing their devices, as the ranks of
// one process share a node's GPUs: the devices are opened once, every
// rank's resource set has them, and the device collectives move data
// between the ranks' buffers by copies within the device
// (resourceset.BcastDevice's device-to-device path). Under MPI each
// process has its own, as with WithSimDevices.
func WithSharedSimDevices(cfgs ...accel.SimConfig) Option {
	return func(c *config) {
		c.sims, c.simsSet, c.shareSims = append(c.sims, cfgs...), true, true
	}
}

// simConfigs returns the simulated devices to open: the option's, or the
// environment's.
func simConfigs(cfg *config) ([]accel.SimConfig, error) {
	if cfg.simsSet {
		return cfg.sims, nil
	}
	devs, err := scheduler.SimDevicesFromEnv(cfg.getenv)
	if err != nil {
		// The variable is the runtime view's to read: say so once, not
		// "runtimeview: runtimeview: invalid option: scheduler: ...".
		detail := strings.TrimPrefix(err.Error(), scheduler.ErrBadOption.Error()+": ")
		return nil, &optionError{msg: ErrOption.Error() + ": " + detail, err: err}
	}
	out := make([]accel.SimConfig, len(devs))
	for i, d := range devs {
		out[i] = accel.SimConfig{Memory: d.Memory, Bandwidth: d.Bandwidth, Latency: d.Latency}
	}
	return out, nil
}

// WithCUDA gives every rank up to n of its machine's CUDA GPUs (all of
// them when n < 0; CUDA_VISIBLE_DEVICES decides which a process sees):
// device components of the rank's resource set (cuda.Accel), and GPU
// workers of the rank's Scheduler. The in-process ranks of RunLocal share
// each GPU object, so their device collectives copy between their
// buffers within the GPU where they can; under MPI each process opens
// its own, and the collectives stage through host memory. Without a driver a rank has no GPU, and no error.
// Environment, when the option is not given: PZ_NCUDA=n; PZ_CUDA_LIBRARY
// names the driver library.
func WithCUDA(n int) Option {
	return func(c *config) { c.cudaN, c.cudaSet = n, true }
}

// WithCUDADriver makes WithCUDA use d instead of the system's driver.
func WithCUDADriver(d *cuda.Driver) Option {
	return func(c *config) { c.cudaDriver = d }
}

// openGPUs opens the GPUs WithCUDA (or PZ_NCUDA) asks for.
func openGPUs(ctx context.Context, cfg *config) ([]accel.Device, error) {
	d, ords, err := cuda.Select(cfg.getenv, cfg.cudaN, cfg.cudaSet, cfg.cudaDriver)
	if errors.Is(err, cuda.ErrBadArgument) {
		return nil, fmt.Errorf("runtimeview: %w: %w", ErrOption, err)
	}
	if err != nil {
		return nil, fmt.Errorf("runtimeview: %w", err)
	}
	var devs []accel.Device
	for _, o := range ords {
		a, err := d.NewAccel(ctx, o)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("runtimeview: CUDA GPU %d: %w", o, err), closeDevices(devs))
		}
		devs = append(devs, a)
	}
	return devs, nil
}

// openDevices opens this rank's simulated devices and GPUs and returns
// every device of the rank, the ones it owns (to close; not those
// RunLocal shares), and the machine description that lists them (a copy
// of m: in-process ranks share m).
func openDevices(ctx context.Context, cfg *config, m *hardware.Machine) (devs, owned []accel.Device, _ *hardware.Machine, _ error) {
	devs = cfg.shared
	if devs == nil {
		sims, err := simConfigs(cfg)
		if err != nil {
			return nil, nil, nil, err
		}
		if len(sims) > 0 {
			if owned, err = newSims(sims); err != nil {
				return nil, nil, nil, err
			}
		}
		devs = owned
	}
	gpus := cfg.sharedGPUs
	if !cfg.gpusShared {
		var err error
		if gpus, err = openGPUs(ctx, cfg); err != nil {
			return nil, nil, nil, errors.Join(err, closeDevices(owned))
		}
		owned = append(owned, gpus...)
	}
	devs = append(devs[:len(devs):len(devs)], gpus...)
	if len(devs) == 0 {
		return nil, nil, m, nil
	}
	return devs, owned, describe(m, devs), nil
}

// newSims opens simulated devices.
func newSims(sims []accel.SimConfig) ([]accel.Device, error) {
	var devs []accel.Device
	for i, sc := range sims {
		d, err := accel.NewSim(i, sc)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("runtimeview: simulated device %d: %w", i, err), closeDevices(devs))
		}
		devs = append(devs, d)
	}
	return devs, nil
}

// describe returns a copy of m listing devs (in-process ranks share m).
func describe(m *hardware.Machine, devs []accel.Device) *hardware.Machine {
	mm := *m
	mm.Accelerators = append([]hardware.Accelerator(nil), m.Accelerators...)
	for _, d := range devs {
		kind := "sim"
		if _, ok := d.(*cuda.Accel); ok {
			kind = "cuda"
		}
		mm.Accelerators = append(mm.Accelerators, hardware.Accelerator{Name: d.Name(), Kind: kind, MemoryBytes: d.Capacity()})
	}
	return &mm
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
// reduction of the next; a length that differs across ranks is an error
// wrapping comm.ErrMismatch on every rank.
func AllReduceDevice[T comm.Number](ctx context.Context, rt *RuntimeView, buf *resourceset.DeviceSlice[T], op comm.Op) error {
	if err := resourceset.AllReduceDevice(ctx, rt.c, buf, op); err != nil {
		return fmt.Errorf("runtimeview: %w", err)
	}
	return nil
}

// AllGatherDevice collects every rank's mine (lengths may differ) into
// every rank's into, in rank order; into holds the sum of the lengths.
func AllGatherDevice[T comm.Number](ctx context.Context, rt *RuntimeView, mine, into *resourceset.DeviceSlice[T]) error {
	if err := resourceset.AllGatherDevice(ctx, rt.c, mine, into); err != nil {
		return fmt.Errorf("runtimeview: %w", err)
	}
	return nil
}

// optionError is an error of an option or variable the runtime view reads
// through another package: its own words, wrapping ErrOption and that
// package's error.
type optionError struct {
	msg string
	err error
}

func (e *optionError) Error() string   { return e.msg }
func (e *optionError) Unwrap() []error { return []error{ErrOption, e.err} }
