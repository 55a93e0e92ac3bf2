// Package nvml binds the little of NVML, the NVIDIA Management Library,
// that pz needs - a GPU's total, free and used memory - at run time,
// without cgo: Open loads libnvidia-ml.so.1 (installed with every NVIDIA
// driver) through github.com/ebitengine/purego, as package
// [github.com/pzgo/pz/hardware/cuda] loads the CUDA driver.
//
//	l, err := nvml.Open()
//	if err != nil { ... }        // errors.Is(err, nvml.ErrNoLibrary): no NVML here
//	defer l.Close()
//	dev, err := l.DeviceByUUID("GPU-6c2d2a6b-...")  // or DeviceByPCIBusID("0000:01:00.0")
//	m, err := dev.MemoryInfo()   // m.TotalBytes, m.FreeBytes, m.UsedBytes
//
// # Why NVML
//
// The CUDA driver reports free memory only through cuMemGetInfo, which
// needs a context on the device: creating one takes time (typically
// 0.1-0.5 s) and device memory of its own, and on a GPU in
// exclusive-process compute mode that another process holds it fails.
// NVML reads the same figures from the kernel driver with no context.
// Package hardware therefore asks NVML first and creates a context only
// where NVML is missing or does not know the device.
//
// # Finding the library
//
// Open loads the file named by PZ_NVML_LIBRARY (EnvLibrary) when it is
// set, else DefaultLibrary; OpenLibrary takes a path. Where the library is
// absent, lacks an entry point, or reports that the NVIDIA driver is not
// loaded, the error wraps ErrNoLibrary. A nil *Library answers every
// lookup with ErrNoLibrary, so callers need no special case.
//
// # Entry points and errors
//
// Bound, with the prototypes of nvml.h (see api in nvml.go):
// nvmlInit_v2, nvmlShutdown, nvmlErrorString, nvmlDeviceGetHandleByUUID,
// nvmlDeviceGetHandleByPciBusId_v2 and nvmlDeviceGetMemoryInfo. A failed
// call returns an *Error naming the function, the device it was about, the
// nvmlReturn_t and NVML's description of it (nvmlErrorString); it unwraps
// to a Return, so errors.Is(err, nvml.ErrNotFound) works.
//
// # UUIDs
//
// NVML names a GPU by the string nvidia-smi -L prints,
// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" in lower-case hex, and (since
// driver R470) a MIG instance by "MIG-" and the same form. The CUDA driver
// gives 16 bytes (cuDeviceGetUuid); hardware/cuda's DeviceInfo.UUID
// formats them the nvidia-smi way with the "GPU-" prefix, so a GPU's can
// be passed to DeviceByUUID as is, and a MIG instance's after changing the
// prefix (package hardware tries both).
//
// # Testing
//
// internal/fakenvml is a stand-in NVML in C, compiled by the tests and
// loaded with OpenLibrary; its devices come from the environment.
package nvml
