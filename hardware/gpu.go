package hardware

import (
	"context"
	"errors"
	"fmt"

	"github.com/pzgo/pz/hardware/cuda"
)

// A GPU is one CUDA device as this process sees it (CUDA_VISIBLE_DEVICES
// applies).
type GPU struct {
	// Index is the CUDA device ordinal ("index").
	Index int `json:"index"`
	// Name is the product name, e.g. "NVIDIA H100 80GB HBM3" ("name").
	Name string `json:"name"`
	// UUID is the device UUID as nvidia-smi prints it, "GPU-…" ("uuid").
	UUID string `json:"uuid"`
	// MemoryTotalBytes is the device memory size ("memory_total_bytes").
	MemoryTotalBytes uint64 `json:"memory_total_bytes"`
	// MemoryFreeBytes is the free device memory when Discover ran
	// ("memory_free_bytes"); 0 if it could not be read.
	MemoryFreeBytes uint64 `json:"memory_free_bytes"`
	// SMs is the number of streaming multiprocessors ("sm_count").
	SMs int `json:"sm_count"`
	// ComputeCapability is "major.minor", e.g. "9.0" ("compute_capability").
	ComputeCapability string `json:"compute_capability"`
	// PCIBusID is the PCI location in Linux sysfs form, "0000:01:00.0"
	// ("pci_bus_id").
	PCIBusID string `json:"pci_bus_id"`
}

// An Accelerator is a device a rank opened to compute with and keep data
// on (package hardware/accel).
type Accelerator struct {
	// Name is the device's name on its rank, e.g. "sim0" ("name").
	Name string `json:"name"`
	// Kind is "sim" for a simulated device ("kind").
	Kind string `json:"kind"`
	// MemoryBytes is its memory ("memory_bytes").
	MemoryBytes int64 `json:"memory_bytes"`
}

// discoverGPUs lists the CUDA devices. No driver means no GPUs and no
// error; other failures are returned with what was found so far.
func discoverGPUs(ctx context.Context, cfg config) ([]GPU, error) {
	d := cfg.driver
	if !cfg.haveDriver {
		var err error
		d, err = cuda.Open()
		if err != nil {
			if errors.Is(err, cuda.ErrNoDriver) {
				return nil, nil
			}
			return nil, err
		}
	}
	devs, err := d.Devices()
	gpus := make([]GPU, 0, len(devs))
	for _, dev := range devs {
		g := GPU{
			Index:             dev.Ordinal,
			Name:              dev.Name,
			UUID:              dev.UUID,
			MemoryTotalBytes:  dev.TotalMemoryBytes,
			SMs:               dev.SMCount,
			ComputeCapability: dev.ComputeCapability(),
			PCIBusID:          dev.PCIBusID,
		}
		free, ferr := freeMemory(ctx, d, dev.Ordinal)
		if ferr != nil {
			err = errors.Join(err, fmt.Errorf("device %d free memory: %w", dev.Ordinal, ferr))
		}
		g.MemoryFreeBytes = free
		gpus = append(gpus, g)
	}
	return gpus, err
}

// freeMemory reads a device's free memory, which needs its context.
func freeMemory(ctx context.Context, d *cuda.Driver, ordinal int) (uint64, error) {
	c, err := d.NewContext(ctx, ordinal)
	if err != nil {
		return 0, err
	}
	free, _, err := c.MemInfo(ctx)
	return free, errors.Join(err, c.Close())
}
