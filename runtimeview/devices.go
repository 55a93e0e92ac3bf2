package runtimeview

import (
	"context"
	"errors"
	"fmt"

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
		return nil, fmt.Errorf("runtimeview: %w: %w", ErrOption, err)
	}
	out := make([]accel.SimConfig, len(devs))
	for i, d := range devs {
		out[i] = accel.SimConfig{Memory: d.Memory, Bandwidth: d.Bandwidth, Latency: d.Latency}
	}
	return out, nil
}

// openDevices opens this rank's simulated devices and returns them with
// the machine description that lists them (a copy of m: in-process ranks
// share m).
func openDevices(cfg *config, m *hardware.Machine) ([]accel.Device, *hardware.Machine, error) {
	devs := cfg.shared
	if devs == nil {
		sims, err := simConfigs(cfg)
		if err != nil || len(sims) == 0 {
			return nil, m, err
		}
		if devs, err = newSims(sims); err != nil {
			return nil, nil, err
		}
	}
	return devs, describe(m, devs), nil
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
		mm.Accelerators = append(mm.Accelerators, hardware.Accelerator{Name: d.Name(), Kind: "sim", MemoryBytes: d.Capacity()})
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
