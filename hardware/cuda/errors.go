package cuda

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNoDriver is returned by Open when no usable CUDA driver is present:
// libcuda.so.1 cannot be loaded, it lacks the entry points this package
// needs, it is the toolkit's stub library, or cuInit reports that there is
// no device. Callers treat it as "zero GPUs", not as a failure. Methods
// that need a driver return it when called on a nil *Driver.
var ErrNoDriver = errors.New("cuda: no usable CUDA driver")

// ErrClosed is returned by calls on a Context after Close.
var ErrClosed = errors.New("cuda: context closed")

// ErrBadArgument is returned for invalid arguments detected before calling
// the driver (a negative size, an unsupported kernel argument type, a
// buffer too small for a copy).
var ErrBadArgument = errors.New("cuda: bad argument")

// A Result is a CUresult code returned by the CUDA driver. Results other
// than Success are errors; the constants below name the common ones so
// that callers can test with errors.Is(err, cuda.ErrOutOfMemory).
//
// ErrNotSupported (CUDA_ERROR_NOT_SUPPORTED) is also what the methods
// that need an entry point the loaded driver lacks (one newer than the
// driver, such as cuMemAllocAsync before CUDA 11.2) return, wrapped with
// the name of the missing function: either way the feature cannot be
// used with this driver and device.
type Result int32

// CUresult values, from the CUDA driver API's cuda.h.
const (
	Success                        Result = 0
	ErrInvalidValue                Result = 1
	ErrOutOfMemory                 Result = 2
	ErrNotInitialized              Result = 3
	ErrDeinitialized               Result = 4
	ErrStubLibrary                 Result = 34
	ErrInsufficientDriver          Result = 35
	ErrDeviceUnavailable           Result = 46
	ErrNoDevice                    Result = 100
	ErrInvalidDevice               Result = 101
	ErrInvalidImage                Result = 200
	ErrInvalidContext              Result = 201
	ErrNoBinaryForGPU              Result = 209
	ErrPeerAccessUnsupported       Result = 217
	ErrInvalidPTX                  Result = 218
	ErrUnsupportedPTXVersion       Result = 222
	ErrInvalidHandle               Result = 400
	ErrNotFound                    Result = 500
	ErrNotReady                    Result = 600
	ErrIllegalAddress              Result = 700
	ErrLaunchOutOfResources        Result = 701
	ErrLaunchTimeout               Result = 702
	ErrPeerAccessAlreadyEnabled    Result = 704
	ErrPeerAccessNotEnabled        Result = 705
	ErrContextIsDestroyed          Result = 709
	ErrHostMemoryAlreadyRegistered Result = 712
	ErrHostMemoryNotRegistered     Result = 713
	ErrLaunchFailed                Result = 719
	ErrNotPermitted                Result = 800
	ErrNotSupported                Result = 801
	ErrSystemDriverMismatch        Result = 803
	ErrCompatNotSupported          Result = 804
	ErrInvalidResourceType         Result = 914
	ErrInvalidResourceConfig       Result = 915
	ErrStreamDetached              Result = 917
	ErrUnknown                     Result = 999
	errOperatingSystem             Result = 304
	errSharedObjectInitFailed      Result = 303
)

// resultName returns the name cuda.h gives r, or "".
func resultName(r Result) string {
	switch r {
	case Success:
		return "CUDA_SUCCESS"
	case ErrInvalidValue:
		return "CUDA_ERROR_INVALID_VALUE"
	case ErrOutOfMemory:
		return "CUDA_ERROR_OUT_OF_MEMORY"
	case ErrNotInitialized:
		return "CUDA_ERROR_NOT_INITIALIZED"
	case ErrDeinitialized:
		return "CUDA_ERROR_DEINITIALIZED"
	case ErrStubLibrary:
		return "CUDA_ERROR_STUB_LIBRARY"
	case ErrInsufficientDriver:
		return "CUDA_ERROR_INSUFFICIENT_DRIVER"
	case ErrDeviceUnavailable:
		return "CUDA_ERROR_DEVICE_UNAVAILABLE"
	case ErrNoDevice:
		return "CUDA_ERROR_NO_DEVICE"
	case ErrInvalidDevice:
		return "CUDA_ERROR_INVALID_DEVICE"
	case ErrInvalidImage:
		return "CUDA_ERROR_INVALID_IMAGE"
	case ErrInvalidContext:
		return "CUDA_ERROR_INVALID_CONTEXT"
	case ErrNoBinaryForGPU:
		return "CUDA_ERROR_NO_BINARY_FOR_GPU"
	case ErrPeerAccessUnsupported:
		return "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED"
	case ErrInvalidPTX:
		return "CUDA_ERROR_INVALID_PTX"
	case ErrUnsupportedPTXVersion:
		return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"
	case errSharedObjectInitFailed:
		return "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED"
	case errOperatingSystem:
		return "CUDA_ERROR_OPERATING_SYSTEM"
	case ErrInvalidHandle:
		return "CUDA_ERROR_INVALID_HANDLE"
	case ErrNotFound:
		return "CUDA_ERROR_NOT_FOUND"
	case ErrNotReady:
		return "CUDA_ERROR_NOT_READY"
	case ErrIllegalAddress:
		return "CUDA_ERROR_ILLEGAL_ADDRESS"
	case ErrLaunchOutOfResources:
		return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"
	case ErrLaunchTimeout:
		return "CUDA_ERROR_LAUNCH_TIMEOUT"
	case ErrPeerAccessAlreadyEnabled:
		return "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"
	case ErrPeerAccessNotEnabled:
		return "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED"
	case ErrContextIsDestroyed:
		return "CUDA_ERROR_CONTEXT_IS_DESTROYED"
	case ErrHostMemoryAlreadyRegistered:
		return "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"
	case ErrHostMemoryNotRegistered:
		return "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"
	case ErrLaunchFailed:
		return "CUDA_ERROR_LAUNCH_FAILED"
	case ErrNotPermitted:
		return "CUDA_ERROR_NOT_PERMITTED"
	case ErrNotSupported:
		return "CUDA_ERROR_NOT_SUPPORTED"
	case ErrSystemDriverMismatch:
		return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"
	case ErrCompatNotSupported:
		return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"
	case ErrInvalidResourceType:
		return "CUDA_ERROR_INVALID_RESOURCE_TYPE"
	case ErrInvalidResourceConfig:
		return "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION"
	case ErrStreamDetached:
		return "CUDA_ERROR_STREAM_DETACHED"
	case ErrUnknown:
		return "CUDA_ERROR_UNKNOWN"
	}
	return ""
}

// Name returns the CUresult's symbolic name, e.g.
// "CUDA_ERROR_INVALID_CONTEXT", or "CUDA_ERROR_<number>" for codes this
// package does not list (the driver's own name is in Error.Name).
func (r Result) Name() string {
	if n := resultName(r); n != "" {
		return n
	}
	return "CUDA_ERROR_" + strconv.Itoa(int(r))
}

// Error implements error.
func (r Result) Error() string {
	return "cuda: " + r.Name()
}

// An Error is a failed CUDA driver call. It unwraps to its Result, so
// errors.Is(err, cuda.ErrOutOfMemory) works.
type Error struct {
	// Call is the driver function that failed, e.g. "cuMemAlloc_v2".
	Call string
	// Code is the CUresult it returned.
	Code Result
	// Name and Description are the driver's cuGetErrorName and
	// cuGetErrorString for Code ("" when the driver does not know it).
	Name, Description string
	// Log holds the JIT compiler's error log for failed module loads.
	Log string
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	name := e.Name
	if name == "" {
		name = e.Code.Name()
	}
	fmt.Fprintf(&b, "cuda: %s: %s (%d)", e.Call, name, int32(e.Code))
	if e.Description != "" {
		b.WriteString(": ")
		b.WriteString(e.Description)
	}
	if e.Log != "" {
		b.WriteString("\n")
		b.WriteString(e.Log)
	}
	return b.String()
}

// Unwrap returns the Result.
func (e *Error) Unwrap() error { return e.Code }
