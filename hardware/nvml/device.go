package nvml

// A Device is one GPU (or MIG instance) that a Library found. It is a
// small value, safe to copy and to use concurrently, and valid until its
// Library is closed.
type Device struct {
	lib    *Library
	handle uintptr // the nvmlDevice_t
	id     string
}

// Memory is a device's memory as nvmlDeviceGetMemoryInfo reports it
// (nvmlMemory_t), in bytes.
type Memory struct {
	// TotalBytes is the total device memory.
	TotalBytes uint64
	// FreeBytes is the memory nobody has allocated.
	FreeBytes uint64
	// UsedBytes is the memory allocated or reserved by the driver; with
	// FreeBytes it makes TotalBytes.
	UsedBytes uint64
}

// DeviceByUUID finds the device with the given UUID, as nvidia-smi -L
// prints it: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", or "MIG-..." for
// a MIG instance (nvmlDeviceGetHandleByUUID). A UUID that names no device
// gives an error wrapping ErrNotFound. NVML may initialize the GPU on the
// first lookup (slow without persistence mode), but it creates no CUDA
// context.
func (l *Library) DeviceByUUID(uuid string) (Device, error) {
	return l.device("nvmlDeviceGetHandleByUUID", uuid, func(h *uintptr) Return {
		return l.api.handleByUUID(uuid, h)
	})
}

// DeviceByPCIBusID finds the device at a PCI location
// (nvmlDeviceGetHandleByPciBusId_v2). NVML reads the numbers in
// hexadecimal in the forms domain:bus:device.function (Linux sysfs's
// "0000:01:00.0", nvidia-smi's "00000000:01:00.0"), domain:bus:device and
// bus:device.function. A location with no device gives an error wrapping
// ErrNotFound, a malformed one ErrInvalidArgument.
func (l *Library) DeviceByPCIBusID(busID string) (Device, error) {
	return l.device("nvmlDeviceGetHandleByPciBusId_v2", busID, func(h *uintptr) Return {
		return l.api.handleByPCIBusID(busID, h)
	})
}

// device runs a handle lookup named call for id.
func (l *Library) device(call, id string, lookup func(*uintptr) Return) (Device, error) {
	if err := cString(call, id); err != nil {
		return Device{}, err
	}
	var h uintptr
	if err := l.call(call, id, func() Return { return lookup(&h) }); err != nil {
		return Device{}, err
	}
	return Device{lib: l, handle: h, id: id}, nil
}

// ID returns the UUID or PCI bus id the device was found by.
func (d Device) ID() string { return d.id }

// MemoryInfo returns the device's total, free and used memory
// (nvmlDeviceGetMemoryInfo). It needs no CUDA context, so it works on a
// GPU in exclusive-process mode that another process holds.
func (d Device) MemoryInfo() (Memory, error) {
	if d.lib == nil {
		return Memory{}, ErrNoLibrary
	}
	var m memory
	err := d.lib.call("nvmlDeviceGetMemoryInfo", d.id, func() Return {
		return d.lib.api.memoryInfo(d.handle, &m)
	})
	if err != nil {
		return Memory{}, err
	}
	return Memory{TotalBytes: m.total, FreeBytes: m.free, UsedBytes: m.used}, nil
}
