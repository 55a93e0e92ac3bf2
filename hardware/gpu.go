package hardware

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/hardware/nvml"
)

// A GPU is one CUDA device as this process sees it (CUDA_VISIBLE_DEVICES
// applies).
//
// Everything but the free memory comes from the CUDA driver without a
// context. The free memory comes from NVML (libnvidia-ml.so.1, or the
// file PZ_NVML_LIBRARY or WithNVMLLibrary names; package
// [github.com/pzgo/pz/hardware/nvml]), which reads it without a CUDA
// context, so that discovery works on GPUs in exclusive-process mode that
// other processes hold and costs them nothing. NVML finds the device by
// its UUID (a MIG instance's too), or by its PCI bus id when the driver
// reports no UUID. Only where NVML is missing, or does not know the
// device, does Discover retain the device's primary context to ask
// cuMemGetInfo, as it always did before; if that fails too (the GPU is
// busy in exclusive-process mode), the GPU is still listed, with
// MemoryFreeBytes 0 and the reason in Machine.Warnings.
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
	// ("memory_free_bytes"), from NVML where it knows the device, else
	// from a CUDA context; 0 if it could not be read.
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
// error; other failures are returned with what was found so far, and a
// device whose free memory cannot be read is listed with 0.
func discoverGPUs(ctx context.Context, cfg config) (gpus []GPU, err error) {
	d := cfg.driver
	if !cfg.haveDriver {
		d, err = cuda.Open()
		if err != nil {
			if errors.Is(err, cuda.ErrNoDriver) {
				return nil, nil
			}
			return nil, err
		}
	}
	devs, err := d.Devices()
	gpus = make([]GPU, 0, len(devs))
	if len(devs) == 0 {
		return gpus, err
	}
	// NVML is loaded only once there are GPUs to ask it about.
	lib, nerr := openNVML(cfg)
	if nerr != nil {
		err = errors.Join(err, fmt.Errorf("%w (free memory is read through CUDA contexts instead)", nerr))
	}
	defer func() { err = errors.Join(err, lib.Close()) }()
	for _, dev := range devs {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return gpus, errors.Join(err, ctxErr)
		}
		g := GPU{
			Index:             dev.Ordinal,
			Name:              dev.Name,
			UUID:              dev.UUID,
			MemoryTotalBytes:  dev.TotalMemoryBytes,
			SMs:               dev.SMCount,
			ComputeCapability: dev.ComputeCapability(),
			PCIBusID:          dev.PCIBusID,
		}
		free, ferr := freeMemory(ctx, cfg, lib, d, dev)
		if ferr != nil {
			err = errors.Join(err, fmt.Errorf("device %d free memory: %w", dev.Ordinal, ferr))
		}
		g.MemoryFreeBytes = free
		gpus = append(gpus, g)
	}
	return gpus, err
}

// openNVML loads NVML for discovery: the library WithNVMLLibrary names,
// else the one PZ_NVML_LIBRARY names, else the system's. Without the
// system's library it returns nil and no error (contexts serve instead);
// a named library that cannot be used, or an NVML that fails to
// initialize, is an error. A nil Library answers every lookup with
// nvml.ErrNoLibrary.
func openNVML(cfg config) (*nvml.Library, error) {
	switch {
	case cfg.noNVML:
		return nil, nil
	case cfg.nvmlPath != "":
		return nvml.OpenLibrary(cfg.nvmlPath)
	}
	lib, err := nvml.Open()
	if err != nil && errors.Is(err, nvml.ErrNoLibrary) && os.Getenv(nvml.EnvLibrary) == "" {
		return nil, nil
	}
	return lib, err
}

// freeMemory reads a device's free memory: from NVML when lib knows the
// device, else through the device's primary context (cfg.contextFree).
// NVML's own failures are reported only when the context fails too.
func freeMemory(ctx context.Context, cfg config, lib *nvml.Library, d *cuda.Driver, dev cuda.DeviceInfo) (uint64, error) {
	var nerr error
	if lib != nil {
		m, err := nvmlMemory(lib, dev.UUID, dev.PCIBusID)
		if err == nil {
			return m.FreeBytes, nil
		}
		if !errors.Is(err, nvml.ErrNotFound) {
			nerr = err
		}
	}
	free, err := cfg.contextFree(ctx, d, dev.Ordinal)
	if err != nil {
		return 0, errors.Join(nerr, err)
	}
	return free, nil
}

// nvmlMemory asks NVML about the CUDA device with the given UUID (as
// cuda.DeviceInfo spells it) and PCI bus id. It looks the device up by
// UUID, under "GPU-" and then "MIG-": CUDA formats a MIG instance's UUID
// like a GPU's, NVML and nvidia-smi spell it "MIG-...". The PCI bus id is
// used only when the driver reports no UUID: on a MIG-partitioned GPU
// every instance has the GPU's bus id, and the GPU's free memory is not
// the instance's.
func nvmlMemory(lib *nvml.Library, uuid, busID string) (nvml.Memory, error) {
	var dev nvml.Device
	var err error
	if uuid == "" {
		dev, err = lib.DeviceByPCIBusID(busID)
	} else {
		dev, err = lib.DeviceByUUID(uuid)
		if rest, ok := strings.CutPrefix(uuid, "GPU-"); ok && errors.Is(err, nvml.ErrNotFound) {
			if mig, merr := lib.DeviceByUUID("MIG-" + rest); merr == nil {
				dev, err = mig, nil
			}
		}
	}
	if err != nil {
		return nvml.Memory{}, err
	}
	return dev.MemoryInfo()
}

// contextFreeMemory reads a device's free memory through its primary
// context, which it retains (creating it if nobody holds it) and
// releases: the path without NVML.
func contextFreeMemory(ctx context.Context, d *cuda.Driver, ordinal int) (uint64, error) {
	c, err := d.NewContext(ctx, ordinal)
	if err != nil {
		return 0, err
	}
	free, _, err := c.MemInfo(ctx)
	return free, errors.Join(err, c.Close())
}
