package nvml

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNoLibrary is returned by Open, OpenEnv and OpenLibrary when no usable
// NVML is present: the library cannot be loaded, it lacks an entry point
// this package needs, or nvmlInit_v2 reports that the NVIDIA driver is not
// loaded (NVML_ERROR_DRIVER_NOT_LOADED). Callers treat it as "read GPU
// state some other way", not as a failure. Methods called on a nil
// *Library, or on a Device not found through a Library, return it too.
var ErrNoLibrary = errors.New("nvml: no usable NVML library")

// ErrClosed is returned by calls on a Library, or on its Devices, after
// Library.Close.
var ErrClosed = errors.New("nvml: library closed")

// A Return is an nvmlReturn_t code returned by NVML. Returns other than
// Success are errors; the constants below name the common ones so that
// callers can test with errors.Is(err, nvml.ErrNotFound).
type Return int32

// nvmlReturn_t values, from nvml.h.
const (
	Success                 Return = 0
	ErrUninitialized        Return = 1
	ErrInvalidArgument      Return = 2
	ErrNotSupported         Return = 3
	ErrNoPermission         Return = 4
	ErrAlreadyInitialized   Return = 5
	ErrNotFound             Return = 6
	ErrInsufficientSize     Return = 7
	ErrDriverNotLoaded      Return = 9
	ErrTimeout              Return = 10
	ErrLibraryNotFound      Return = 12
	ErrFunctionNotFound     Return = 13
	ErrGPUIsLost            Return = 15
	ErrResetRequired        Return = 16
	ErrOperatingSystem      Return = 17
	ErrLibRMVersionMismatch Return = 18
	ErrInUse                Return = 19
	ErrMemory               Return = 20
	ErrNoData               Return = 21
	ErrUnknown              Return = 999
)

// returnNames are the names nvml.h gives the Returns above.
var returnNames = map[Return]string{
	Success:                 "NVML_SUCCESS",
	ErrUninitialized:        "NVML_ERROR_UNINITIALIZED",
	ErrInvalidArgument:      "NVML_ERROR_INVALID_ARGUMENT",
	ErrNotSupported:         "NVML_ERROR_NOT_SUPPORTED",
	ErrNoPermission:         "NVML_ERROR_NO_PERMISSION",
	ErrAlreadyInitialized:   "NVML_ERROR_ALREADY_INITIALIZED",
	ErrNotFound:             "NVML_ERROR_NOT_FOUND",
	ErrInsufficientSize:     "NVML_ERROR_INSUFFICIENT_SIZE",
	ErrDriverNotLoaded:      "NVML_ERROR_DRIVER_NOT_LOADED",
	ErrTimeout:              "NVML_ERROR_TIMEOUT",
	ErrLibraryNotFound:      "NVML_ERROR_LIBRARY_NOT_FOUND",
	ErrFunctionNotFound:     "NVML_ERROR_FUNCTION_NOT_FOUND",
	ErrGPUIsLost:            "NVML_ERROR_GPU_IS_LOST",
	ErrResetRequired:        "NVML_ERROR_RESET_REQUIRED",
	ErrOperatingSystem:      "NVML_ERROR_OPERATING_SYSTEM",
	ErrLibRMVersionMismatch: "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
	ErrInUse:                "NVML_ERROR_IN_USE",
	ErrMemory:               "NVML_ERROR_MEMORY",
	ErrNoData:               "NVML_ERROR_NO_DATA",
	ErrUnknown:              "NVML_ERROR_UNKNOWN",
}

// Name returns the Return's symbolic name, e.g. "NVML_ERROR_NOT_FOUND",
// or "NVML_ERROR_<number>" for codes this package does not list (NVML's
// own description is in Error.Message).
func (r Return) Name() string {
	if n, ok := returnNames[r]; ok {
		return n
	}
	return "NVML_ERROR_" + strconv.Itoa(int(r))
}

// Error implements error.
func (r Return) Error() string {
	return "nvml: " + r.Name()
}

// An Error is a failed NVML call. It unwraps to its Return, so
// errors.Is(err, nvml.ErrNotFound) works.
type Error struct {
	// Call is the NVML function that failed, e.g.
	// "nvmlDeviceGetHandleByUUID".
	Call string
	// Device is the UUID or PCI bus id the call was about; "" for calls
	// about no device (nvmlInit_v2).
	Device string
	// Code is the nvmlReturn_t it returned.
	Code Return
	// Message is NVML's description of Code (nvmlErrorString), e.g.
	// "Not Found".
	Message string
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("nvml: ")
	b.WriteString(e.Call)
	if e.Device != "" {
		fmt.Fprintf(&b, "(%s)", e.Device)
	}
	fmt.Fprintf(&b, ": %s (%d)", e.Code.Name(), int32(e.Code))
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Unwrap returns the Return.
func (e *Error) Unwrap() error { return e.Code }
