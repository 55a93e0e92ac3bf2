package cuda

import (
	"bytes"
	"fmt"
)

// An Attribute is a CUdevice_attribute, a property of a device that
// Driver.Attribute reads.
type Attribute int32

// Device attributes, values from cuda.h (CUdevice_attribute).
const (
	AttrMaxThreadsPerBlock             Attribute = 1
	AttrMaxBlockDimX                   Attribute = 2
	AttrMaxGridDimX                    Attribute = 5
	AttrMaxSharedMemoryPerBlock        Attribute = 8
	AttrTotalConstantMemory            Attribute = 9
	AttrWarpSize                       Attribute = 10
	AttrMaxRegistersPerBlock           Attribute = 12
	AttrMultiprocessorCount            Attribute = 16
	AttrIntegrated                     Attribute = 18
	AttrCanMapHostMemory               Attribute = 19
	AttrComputeMode                    Attribute = 20
	AttrConcurrentKernels              Attribute = 31
	AttrECCEnabled                     Attribute = 32
	AttrPCIBusID                       Attribute = 33
	AttrPCIDeviceID                    Attribute = 34
	AttrGlobalMemoryBusWidth           Attribute = 37
	AttrL2CacheSize                    Attribute = 38
	AttrMaxThreadsPerMultiprocessor    Attribute = 39
	AttrAsyncEngineCount               Attribute = 40
	AttrUnifiedAddressing              Attribute = 41
	AttrPCIDomainID                    Attribute = 50
	AttrComputeCapabilityMajor         Attribute = 75
	AttrComputeCapabilityMinor         Attribute = 76
	AttrMaxSharedMemoryPerMultiproc    Attribute = 81
	AttrManagedMemory                  Attribute = 83
	AttrMultiGPUBoard                  Attribute = 84
	AttrConcurrentManagedAccess        Attribute = 89
	AttrMaxSharedMemoryPerBlockOptin   Attribute = 97
	AttrPageableMemoryAccessUsesHostPT Attribute = 100
)

// DeviceInfo describes one CUDA device. All of it is read without creating
// a context. The JSON field names are stable.
type DeviceInfo struct {
	// Ordinal is the CUDA device ordinal, as CUDA_VISIBLE_DEVICES
	// renumbers it ("ordinal").
	Ordinal int `json:"ordinal"`
	// Name is the product name, e.g. "NVIDIA H100 80GB HBM3" ("name").
	Name string `json:"name"`
	// UUID is the device UUID in nvidia-smi's form,
	// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" ("uuid"); "" if the driver
	// cannot report it.
	UUID string `json:"uuid"`
	// TotalMemoryBytes is the device memory size ("memory_total_bytes").
	TotalMemoryBytes uint64 `json:"memory_total_bytes"`
	// SMCount is the number of streaming multiprocessors ("sm_count").
	SMCount int `json:"sm_count"`
	// ComputeMajor and ComputeMinor are the compute capability, e.g. 9 and
	// 0 for an H100 ("compute_major", "compute_minor").
	ComputeMajor int `json:"compute_major"`
	ComputeMinor int `json:"compute_minor"`
	// PCIDomain, PCIBus and PCIDevice locate the device on the PCI bus
	// ("pci_domain", "pci_bus", "pci_device").
	PCIDomain int `json:"pci_domain"`
	PCIBus    int `json:"pci_bus"`
	PCIDevice int `json:"pci_device"`
	// PCIBusID is the same location in the form Linux uses under
	// /sys/bus/pci/devices, "dddd:bb:dd.0" in lower-case hex
	// ("pci_bus_id").
	PCIBusID string `json:"pci_bus_id"`
	// WarpSize, MaxThreadsPerBlock and MaxThreadsPerSM bound kernel launch
	// shapes ("warp_size", "max_threads_per_block", "max_threads_per_sm").
	WarpSize           int `json:"warp_size"`
	MaxThreadsPerBlock int `json:"max_threads_per_block"`
	MaxThreadsPerSM    int `json:"max_threads_per_sm"`
	// SharedMemoryPerBlockBytes is the default shared memory limit of a
	// block, SharedMemoryPerBlockOptinBytes the limit a kernel can opt in
	// to ("shared_memory_per_block_bytes",
	// "shared_memory_per_block_optin_bytes").
	SharedMemoryPerBlockBytes      int `json:"shared_memory_per_block_bytes"`
	SharedMemoryPerBlockOptinBytes int `json:"shared_memory_per_block_optin_bytes"`
	// L2CacheBytes is the L2 cache size ("l2_cache_bytes").
	L2CacheBytes int `json:"l2_cache_bytes"`
	// MemoryBusWidthBits is the global memory bus width
	// ("memory_bus_width_bits").
	MemoryBusWidthBits int `json:"memory_bus_width_bits"`
	// AsyncEngines counts the copy engines that overlap transfers with
	// kernels ("async_engines").
	AsyncEngines int `json:"async_engines"`
	// Integrated is true for a GPU sharing memory with the host
	// ("integrated").
	Integrated bool `json:"integrated"`
}

// ComputeCapability returns "major.minor", e.g. "9.0".
func (i DeviceInfo) ComputeCapability() string {
	return fmt.Sprintf("%d.%d", i.ComputeMajor, i.ComputeMinor)
}

// DeviceCount returns the number of CUDA devices visible to this process;
// 0 for a nil Driver.
func (d *Driver) DeviceCount() (int, error) {
	if d == nil {
		return 0, nil
	}
	var n int32
	if err := d.check("cuDeviceGetCount", d.api.deviceGetCount(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Devices describes every visible device in ordinal order. It is empty
// (and the error nil) for a nil Driver.
func (d *Driver) Devices() ([]DeviceInfo, error) {
	n, err := d.DeviceCount()
	if err != nil || n == 0 {
		return nil, err
	}
	out := make([]DeviceInfo, 0, n)
	for i := range n {
		info, err := d.Device(i)
		if err != nil {
			return out, err
		}
		out = append(out, info)
	}
	return out, nil
}

// device returns the CUdevice handle of an ordinal.
func (d *Driver) device(ordinal int) (int32, error) {
	if d == nil {
		return 0, ErrNoDriver
	}
	var dev int32
	if err := d.check("cuDeviceGet", d.api.deviceGet(&dev, int32(ordinal))); err != nil {
		return 0, fmt.Errorf("device %d: %w", ordinal, err)
	}
	return dev, nil
}

// Attribute returns one attribute of device ordinal.
func (d *Driver) Attribute(ordinal int, a Attribute) (int, error) {
	dev, err := d.device(ordinal)
	if err != nil {
		return 0, err
	}
	return d.attribute(dev, a)
}

func (d *Driver) attribute(dev int32, a Attribute) (int, error) {
	var v int32
	if err := d.check("cuDeviceGetAttribute", d.api.deviceGetAttribute(&v, int32(a), dev)); err != nil {
		return 0, fmt.Errorf("attribute %d: %w", a, err)
	}
	return int(v), nil
}

// Device describes device ordinal.
func (d *Driver) Device(ordinal int) (DeviceInfo, error) {
	info := DeviceInfo{Ordinal: ordinal}
	dev, err := d.device(ordinal)
	if err != nil {
		return info, err
	}
	var name [256]byte
	if err := d.check("cuDeviceGetName", d.api.deviceGetName(&name[0], int32(len(name)), dev)); err != nil {
		return info, err
	}
	if i := bytes.IndexByte(name[:], 0); i >= 0 {
		info.Name = string(name[:i])
	}
	if d.api.deviceGetUUID != nil {
		var u [16]byte
		if err := d.check("cuDeviceGetUuid_v2", d.api.deviceGetUUID(&u, dev)); err != nil {
			return info, err
		}
		info.UUID = formatUUID(u)
	}
	var total uintptr
	if err := d.check("cuDeviceTotalMem_v2", d.api.deviceTotalMem(&total, dev)); err != nil {
		return info, err
	}
	info.TotalMemoryBytes = uint64(total)
	attrs := []struct {
		a   Attribute
		dst *int
	}{
		{AttrMultiprocessorCount, &info.SMCount},
		{AttrComputeCapabilityMajor, &info.ComputeMajor},
		{AttrComputeCapabilityMinor, &info.ComputeMinor},
		{AttrPCIDomainID, &info.PCIDomain},
		{AttrPCIBusID, &info.PCIBus},
		{AttrPCIDeviceID, &info.PCIDevice},
		{AttrWarpSize, &info.WarpSize},
		{AttrMaxThreadsPerBlock, &info.MaxThreadsPerBlock},
		{AttrMaxThreadsPerMultiprocessor, &info.MaxThreadsPerSM},
		{AttrMaxSharedMemoryPerBlock, &info.SharedMemoryPerBlockBytes},
		{AttrMaxSharedMemoryPerBlockOptin, &info.SharedMemoryPerBlockOptinBytes},
		{AttrL2CacheSize, &info.L2CacheBytes},
		{AttrGlobalMemoryBusWidth, &info.MemoryBusWidthBits},
		{AttrAsyncEngineCount, &info.AsyncEngines},
	}
	for _, at := range attrs {
		if *at.dst, err = d.attribute(dev, at.a); err != nil {
			return info, err
		}
	}
	integrated, err := d.attribute(dev, AttrIntegrated)
	if err != nil {
		return info, err
	}
	info.Integrated = integrated != 0
	info.PCIBusID = fmt.Sprintf("%04x:%02x:%02x.0", info.PCIDomain, info.PCIBus, info.PCIDevice)
	return info, nil
}

// formatUUID writes a CUuuid as nvidia-smi does:
// GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
func formatUUID(u [16]byte) string {
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
