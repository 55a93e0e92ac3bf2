package nvml

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/ebitengine/purego"
)

// DefaultLibrary is the soname of the NVML library Open loads. Every
// NVIDIA driver installs it beside libcuda.so.1.
const DefaultLibrary = "libnvidia-ml.so.1"

// EnvLibrary is the environment variable that names another NVML library
// file for Open and OpenEnv (tests point it at a stand-in).
const EnvLibrary = "PZ_NVML_LIBRARY"

// A Library is a loaded and initialized NVML. Its methods, and those of
// its Devices, are safe for concurrent use; NVML itself is thread-safe.
// Close shuts this initialization down; the shared object stays mapped
// for the life of the process, as the CUDA driver does in package
// hardware/cuda, so a later Open is cheap.
//
// A nil *Library stands for "no NVML": its lookups return ErrNoLibrary
// and its Close does nothing.
type Library struct {
	path string
	api  api

	// mu orders calls (read lock) before Close (write lock), so that no
	// call reaches NVML after this Library's nvmlShutdown.
	mu     sync.RWMutex
	closed bool
}

// api holds the NVML entry points, bound with purego. The Go signatures
// follow nvml.h: nvmlReturn_t is an enum (int32, Return); nvmlDevice_t is
// an opaque pointer, carried as uintptr because Go never dereferences it;
// strings are const char * (purego copies a Go string without a
// terminating NUL into C memory for the call, and copies a returned
// char * into a Go string).
type api struct {
	// nvmlReturn_t nvmlInit_v2(void)
	init func() Return
	// nvmlReturn_t nvmlShutdown(void)
	shutdown func() Return
	// const char *nvmlErrorString(nvmlReturn_t result)
	errorString func(r Return) string
	// nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
	handleByUUID func(uuid string, dev *uintptr) Return
	// nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device);
	// falls back to nvmlDeviceGetHandleByPciBusId (NVML before 5.319),
	// which has the same prototype.
	handleByPCIBusID func(busID string, dev *uintptr) Return
	// nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
	memoryInfo func(dev uintptr, mem *memory) Return
}

// memory is nvmlMemory_t: three unsigned long long, in this order.
type memory struct {
	total, free, used uint64
}

// symbol binds one entry point: names are tried in order, the first found
// wins.
type symbol struct {
	fptr  any
	names []string
}

func (a *api) symbols() []symbol {
	return []symbol{
		{&a.init, []string{"nvmlInit_v2"}},
		{&a.shutdown, []string{"nvmlShutdown"}},
		{&a.errorString, []string{"nvmlErrorString"}},
		{&a.handleByUUID, []string{"nvmlDeviceGetHandleByUUID"}},
		{&a.handleByPCIBusID, []string{"nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId"}},
		{&a.memoryInfo, []string{"nvmlDeviceGetMemoryInfo"}},
	}
}

// bind registers syms from the loaded library lib (named name). It
// closes lib when one is missing, before registering anything.
func bind(lib uintptr, name string, syms []symbol) error {
	ptrs := make([]uintptr, len(syms))
	for i, s := range syms {
		for _, n := range s.names {
			if p, err := purego.Dlsym(lib, n); err == nil && p != 0 {
				ptrs[i] = p
				break
			}
		}
		if ptrs[i] == 0 {
			_ = purego.Dlclose(lib)
			return fmt.Errorf("%s lacks %s", name, s.names[0])
		}
	}
	for i, s := range syms {
		purego.RegisterFunc(s.fptr, ptrs[i])
	}
	return nil
}

// Open loads NVML from the file that the environment variable EnvLibrary
// (PZ_NVML_LIBRARY) names, else DefaultLibrary, and initializes it with
// nvmlInit_v2, which attaches no GPU yet and creates no CUDA context.
// Without a usable NVML it returns an error wrapping ErrNoLibrary. The
// caller must Close the Library.
func Open() (*Library, error) {
	return OpenEnv(os.Getenv)
}

// OpenEnv is Open with the environment read through getenv (os.Getenv
// when nil). A library that EnvLibrary names and that cannot be used
// gives an error that names the variable (still wrapping ErrNoLibrary
// when it is missing).
func OpenEnv(getenv func(string) string) (*Library, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	path := getenv(EnvLibrary)
	if path == "" {
		return OpenLibrary(DefaultLibrary)
	}
	l, err := OpenLibrary(path)
	if err != nil {
		return nil, fmt.Errorf("nvml: %s=%q: %w", EnvLibrary, path, err)
	}
	return l, nil
}

// OpenLibrary is Open for an NVML library at another path or soname. It
// costs a dlopen (once per process) and an nvmlInit_v2, which NVML counts:
// each OpenLibrary needs its own Close.
func OpenLibrary(path string) (*Library, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoLibrary, err)
	}
	l := &Library{path: path}
	if err := bind(h, path, l.api.symbols()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoLibrary, err)
	}
	if r := l.api.init(); r != Success {
		err := l.errorf("nvmlInit_v2", "", r)
		if r == ErrDriverNotLoaded {
			return nil, fmt.Errorf("%w: %w", ErrNoLibrary, err)
		}
		return nil, err
	}
	return l, nil
}

// Path returns the name the library was loaded from; "" for a nil
// Library.
func (l *Library) Path() string {
	if l == nil {
		return ""
	}
	return l.path
}

// Close shuts this initialization of NVML down (nvmlShutdown). NVML
// counts initializations, so other Libraries, even of the same file, stay
// usable. Close waits for calls in progress; later calls, on the Library
// and on its Devices, return ErrClosed. It is idempotent: it returns the
// nvmlShutdown error the first time and nil after. Close on a nil Library
// does nothing.
func (l *Library) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	return l.errorf("nvmlShutdown", "", l.api.shutdown())
}

// call runs f, an NVML call about device (a UUID or bus id, or ""),
// unless the Library is nil or closed, and converts its result.
func (l *Library) call(name, device string, f func() Return) error {
	if l == nil {
		return ErrNoLibrary
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	return l.errorf(name, device, f())
}

// errorf turns a failed nvmlReturn_t into an *Error, with NVML's
// description of it; nil for Success.
func (l *Library) errorf(call, device string, r Return) error {
	if r == Success {
		return nil
	}
	return &Error{Call: call, Device: device, Code: r, Message: l.api.errorString(r)}
}

// cString checks that s can be passed as a C string: a NUL byte inside
// would cut it short.
func cString(call, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return &Error{Call: call, Device: s, Code: ErrInvalidArgument, Message: "contains a NUL byte"}
	}
	return nil
}
