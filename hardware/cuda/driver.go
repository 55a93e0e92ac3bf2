package cuda

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"unsafe"

	"github.com/ebitengine/purego"
)

// DefaultLibrary is the soname of the CUDA driver library Open loads. The
// NVIDIA driver installs it; the CUDA toolkit is not needed.
const DefaultLibrary = "libcuda.so.1"

// A DevicePtr is an address in device memory (CUdeviceptr, a 64-bit
// unsigned integer on 64-bit hosts).
type DevicePtr uint64

// A Driver is the loaded CUDA driver library. It is immutable after Open
// and safe for concurrent use. The library stays loaded for the life of
// the process: libcuda cannot be unloaded safely while any context lives.
//
// A nil *Driver stands for "no driver": its DeviceCount is 0, Devices is
// empty, and calls that need a device return ErrNoDriver.
type Driver struct {
	path    string
	version int
	api     api
}

// api holds the driver entry points, bound with purego. The Go signatures
// follow cuda.h: CUresult is int32; CUdevice is int (int32); CUdeviceptr is
// unsigned long long (uint64); size_t is uintptr; unsigned int is uint32;
// handles (CUcontext, CUmodule, CUfunction, CUstream, CUevent) are
// pointers, carried as uintptr because they point to driver memory that Go
// never dereferences. Names are the exported symbols, which for several
// functions are the _v2 variants cuda.h #defines the plain names to.
type api struct {
	// CUresult cuInit(unsigned int Flags)
	init func(flags uint32) Result
	// CUresult cuDriverGetVersion(int *driverVersion)
	driverGetVersion func(version *int32) Result
	// CUresult cuGetErrorName(CUresult error, const char **pStr)
	getErrorName func(r Result, str **byte) Result
	// CUresult cuGetErrorString(CUresult error, const char **pStr)
	getErrorString func(r Result, str **byte) Result
	// CUresult cuDeviceGetCount(int *count)
	deviceGetCount func(count *int32) Result
	// CUresult cuDeviceGet(CUdevice *device, int ordinal)
	deviceGet func(dev *int32, ordinal int32) Result
	// CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
	deviceGetName func(name *byte, length int32, dev int32) Result
	// CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev); CUuuid is
	// struct { char bytes[16]; }. Falls back to cuDeviceGetUuid.
	deviceGetUUID func(uuid *[16]byte, dev int32) Result
	// CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
	deviceTotalMem func(bytes *uintptr, dev int32) Result
	// CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
	deviceGetAttribute func(value *int32, attr int32, dev int32) Result
	// CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
	primaryCtxRetain func(ctx *uintptr, dev int32) Result
	// CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
	primaryCtxRelease func(dev int32) Result
	// CUresult cuCtxSetCurrent(CUcontext ctx)
	ctxSetCurrent func(ctx uintptr) Result
	// CUresult cuCtxSynchronize(void)
	ctxSynchronize func() Result
	// CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
	memGetInfo func(free, total *uintptr) Result
	// CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
	memAlloc func(dptr *DevicePtr, size uintptr) Result
	// CUresult cuMemFree_v2(CUdeviceptr dptr)
	memFree func(dptr DevicePtr) Result
	// CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
	memAllocHost func(pp *unsafe.Pointer, size uintptr) Result
	// CUresult cuMemFreeHost(void *p)
	memFreeHost func(p unsafe.Pointer) Result
	// CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
	memcpyHtoD func(dst DevicePtr, src unsafe.Pointer, n uintptr) Result
	// CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
	memcpyDtoH func(dst unsafe.Pointer, src DevicePtr, n uintptr) Result
	// CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
	memcpyDtoD func(dst, src DevicePtr, n uintptr) Result
	// CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)
	memcpyHtoDAsync func(dst DevicePtr, src unsafe.Pointer, n uintptr, stream uintptr) Result
	// CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
	memcpyDtoHAsync func(dst unsafe.Pointer, src DevicePtr, n uintptr, stream uintptr) Result
	// CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
	memsetD8 func(dst DevicePtr, value uint8, n uintptr) Result
	// CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
	memsetD8Async func(dst DevicePtr, value uint8, n uintptr, stream uintptr) Result
	// CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
	memcpyDtoDAsync func(dst, src DevicePtr, n uintptr, stream uintptr) Result
	// CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
	memcpy2D func(p *memcpy2D) Result
	// CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
	memcpy2DAsync func(p *memcpy2D, stream uintptr) Result
	// CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
	memHostRegister func(p unsafe.Pointer, size uintptr, flags uint32) Result
	// CUresult cuMemHostUnregister(void *p)
	memHostUnregister func(p unsafe.Pointer) Result
	// CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
	streamCreate func(stream *uintptr, flags uint32) Result
	// CUresult cuStreamSynchronize(CUstream hStream)
	streamSynchronize func(stream uintptr) Result
	// CUresult cuStreamQuery(CUstream hStream)
	streamQuery func(stream uintptr) Result
	// CUresult cuStreamDestroy_v2(CUstream hStream)
	streamDestroy func(stream uintptr) Result
	// CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
	streamWaitEvent func(stream, event uintptr, flags uint32) Result
	// CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
	eventCreate func(event *uintptr, flags uint32) Result
	// CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
	eventRecord func(event, stream uintptr) Result
	// CUresult cuEventSynchronize(CUevent hEvent)
	eventSynchronize func(event uintptr) Result
	// CUresult cuEventQuery(CUevent hEvent)
	eventQuery func(event uintptr) Result
	// CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart,
	// CUevent hEnd); cuEventElapsedTime_v2 (CUDA 12.8+, same signature)
	// is preferred when present.
	eventElapsedTime func(ms *float32, start, end uintptr) Result
	// CUresult cuEventDestroy_v2(CUevent hEvent)
	eventDestroy func(event uintptr) Result
	// CUresult cuModuleLoadData(CUmodule *module, const void *image)
	moduleLoadData func(module *uintptr, image unsafe.Pointer) Result
	// CUresult cuModuleLoadDataEx(CUmodule *module, const void *image,
	// unsigned int numOptions, CUjit_option *options, void **optionValues);
	// CUjit_option is an enum (int32). The option values are passed as
	// uintptr so that the array holds no Go pointers.
	moduleLoadDataEx func(module *uintptr, image unsafe.Pointer, numOptions uint32, options *int32, values *uintptr) Result
	// CUresult cuModuleUnload(CUmodule hmod)
	moduleUnload func(module uintptr) Result
	// CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
	moduleGetFunction func(fn *uintptr, module uintptr, name *byte) Result
	// CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX,
	// unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX,
	// unsigned int blockDimY, unsigned int blockDimZ,
	// unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
	// void **extra)
	launchKernel func(fn uintptr, gx, gy, gz, bx, by, bz, sharedMem uint32, stream uintptr, params *unsafe.Pointer, extra *unsafe.Pointer) Result

	// The entry points below are optional: a driver that lacks them
	// still opens, and the methods that need one return an error
	// wrapping ErrNotSupported (see unsupported).

	// CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream); CUDA 11.2
	memAllocAsync func(dptr *DevicePtr, size uintptr, stream uintptr) Result
	// CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream); CUDA 11.2
	memFreeAsync func(dptr DevicePtr, stream uintptr) Result
	// CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev);
	// CUmemoryPool is a handle (uintptr). CUDA 11.2
	deviceGetDefaultMemPool func(pool *uintptr, dev int32) Result
	// CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value);
	// the attribute is an enum (int32), value points to an int or a
	// cuuint64_t depending on it. CUDA 11.2
	memPoolSetAttribute func(pool uintptr, attr int32, value unsafe.Pointer) Result
	// CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value); CUDA 11.2
	memPoolGetAttribute func(pool uintptr, attr int32, value unsafe.Pointer) Result
	// CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep); CUDA 11.2
	memPoolTrimTo func(pool uintptr, keep uintptr) Result
	// CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
	deviceCanAccessPeer func(can *int32, dev, peer int32) Result
	// CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
	ctxEnablePeerAccess func(peer uintptr, flags uint32) Result
	// CUresult cuCtxDisablePeerAccess(CUcontext peerContext)
	ctxDisablePeerAccess func(peer uintptr) Result
	// CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext,
	// CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount, CUstream hStream)
	memcpyPeerAsync func(dst DevicePtr, dstCtx uintptr, src DevicePtr, srcCtx uintptr, n uintptr, stream uintptr) Result
	// CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData);
	// CUhostFn is void (*)(void *userData), a C function pointer (uintptr);
	// userData is passed as an integer key, never a Go pointer. CUDA 10.0
	launchHostFunc func(stream uintptr, fn uintptr, userData uintptr) Result
	// CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
	memHostAlloc func(pp *unsafe.Pointer, size uintptr, flags uint32) Result
	// CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr);
	// the attribute is an enum (int32), data points to a value of the
	// attribute's type; ptr is a CUdeviceptr, which under unified
	// addressing may hold a host address, hence uintptr.
	pointerGetAttribute func(data unsafe.Pointer, attr int32, ptr uintptr) Result

	// Green contexts, CUDA 12.4 (see green.go). CUdevResource is
	// devResource, passed by pointer; CUdevResourceType is an enum
	// (int32); CUdevResourceDesc and CUgreenCtx are handles (uintptr).

	// CUresult cuDeviceGetDevResource(CUdevice device, CUdevResource *resource, CUdevResourceType type)
	deviceGetDevResource func(dev int32, res *devResource, typ int32) Result
	// CUresult cuDevSmResourceSplitByCount(CUdevResource *result, unsigned int *nbGroups,
	// const CUdevResource *input, CUdevResource *remaining, unsigned int useFlags, unsigned int minCount)
	devSmResourceSplitByCount func(result *devResource, nbGroups *uint32, input *devResource, remaining *devResource, flags, minCount uint32) Result
	// CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *phDesc, CUdevResource *resources, unsigned int nbResources)
	devResourceGenerateDesc func(desc *uintptr, resources *devResource, n uint32) Result
	// CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags)
	greenCtxCreate func(green *uintptr, desc uintptr, dev int32, flags uint32) Result
	// CUresult cuGreenCtxDestroy(CUgreenCtx hCtx)
	greenCtxDestroy func(green uintptr) Result
	// CUresult cuCtxFromGreenCtx(CUcontext *pContext, CUgreenCtx hCtx)
	ctxFromGreenCtx func(ctx *uintptr, green uintptr) Result
	// CUresult cuCtxGetDevResource(CUcontext hCtx, CUdevResource *resource, CUdevResourceType type)
	ctxGetDevResource func(ctx uintptr, res *devResource, typ int32) Result
}

// symbol binds one entry point: names are tried in order, the first found
// wins; optional ones may be missing.
type symbol struct {
	fptr     any
	names    []string
	optional bool
}

func (a *api) symbols() []symbol {
	return []symbol{
		{&a.init, []string{"cuInit"}, false},
		{&a.driverGetVersion, []string{"cuDriverGetVersion"}, false},
		{&a.getErrorName, []string{"cuGetErrorName"}, false},
		{&a.getErrorString, []string{"cuGetErrorString"}, false},
		{&a.deviceGetCount, []string{"cuDeviceGetCount"}, false},
		{&a.deviceGet, []string{"cuDeviceGet"}, false},
		{&a.deviceGetName, []string{"cuDeviceGetName"}, false},
		{&a.deviceGetUUID, []string{"cuDeviceGetUuid_v2", "cuDeviceGetUuid"}, true},
		{&a.deviceTotalMem, []string{"cuDeviceTotalMem_v2"}, false},
		{&a.deviceGetAttribute, []string{"cuDeviceGetAttribute"}, false},
		{&a.primaryCtxRetain, []string{"cuDevicePrimaryCtxRetain"}, false},
		{&a.primaryCtxRelease, []string{"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}, false},
		{&a.ctxSetCurrent, []string{"cuCtxSetCurrent"}, false},
		{&a.ctxSynchronize, []string{"cuCtxSynchronize"}, false},
		{&a.memGetInfo, []string{"cuMemGetInfo_v2"}, false},
		{&a.memAlloc, []string{"cuMemAlloc_v2"}, false},
		{&a.memFree, []string{"cuMemFree_v2"}, false},
		{&a.memAllocHost, []string{"cuMemAllocHost_v2"}, false},
		{&a.memFreeHost, []string{"cuMemFreeHost"}, false},
		{&a.memcpyHtoD, []string{"cuMemcpyHtoD_v2"}, false},
		{&a.memcpyDtoH, []string{"cuMemcpyDtoH_v2"}, false},
		{&a.memcpyDtoD, []string{"cuMemcpyDtoD_v2"}, false},
		{&a.memcpyHtoDAsync, []string{"cuMemcpyHtoDAsync_v2"}, false},
		{&a.memcpyDtoHAsync, []string{"cuMemcpyDtoHAsync_v2"}, false},
		{&a.memsetD8, []string{"cuMemsetD8_v2"}, false},
		{&a.memsetD8Async, []string{"cuMemsetD8Async"}, false},
		{&a.memcpyDtoDAsync, []string{"cuMemcpyDtoDAsync_v2"}, false},
		{&a.memcpy2D, []string{"cuMemcpy2D_v2"}, false},
		{&a.memcpy2DAsync, []string{"cuMemcpy2DAsync_v2"}, false},
		{&a.memHostRegister, []string{"cuMemHostRegister_v2"}, false},
		{&a.memHostUnregister, []string{"cuMemHostUnregister"}, false},
		{&a.streamCreate, []string{"cuStreamCreate"}, false},
		{&a.streamSynchronize, []string{"cuStreamSynchronize"}, false},
		{&a.streamQuery, []string{"cuStreamQuery"}, false},
		{&a.streamDestroy, []string{"cuStreamDestroy_v2"}, false},
		{&a.streamWaitEvent, []string{"cuStreamWaitEvent"}, false},
		{&a.eventCreate, []string{"cuEventCreate"}, false},
		{&a.eventRecord, []string{"cuEventRecord"}, false},
		{&a.eventSynchronize, []string{"cuEventSynchronize"}, false},
		{&a.eventQuery, []string{"cuEventQuery"}, false},
		{&a.eventElapsedTime, []string{"cuEventElapsedTime_v2", "cuEventElapsedTime"}, false},
		{&a.eventDestroy, []string{"cuEventDestroy_v2"}, false},
		{&a.moduleLoadData, []string{"cuModuleLoadData"}, false},
		{&a.moduleLoadDataEx, []string{"cuModuleLoadDataEx"}, true},
		{&a.moduleUnload, []string{"cuModuleUnload"}, false},
		{&a.moduleGetFunction, []string{"cuModuleGetFunction"}, false},
		{&a.launchKernel, []string{"cuLaunchKernel"}, false},
		{&a.memAllocAsync, []string{"cuMemAllocAsync"}, true},
		{&a.memFreeAsync, []string{"cuMemFreeAsync"}, true},
		{&a.deviceGetDefaultMemPool, []string{"cuDeviceGetDefaultMemPool"}, true},
		{&a.memPoolSetAttribute, []string{"cuMemPoolSetAttribute"}, true},
		{&a.memPoolGetAttribute, []string{"cuMemPoolGetAttribute"}, true},
		{&a.memPoolTrimTo, []string{"cuMemPoolTrimTo"}, true},
		{&a.deviceCanAccessPeer, []string{"cuDeviceCanAccessPeer"}, true},
		{&a.ctxEnablePeerAccess, []string{"cuCtxEnablePeerAccess"}, true},
		{&a.ctxDisablePeerAccess, []string{"cuCtxDisablePeerAccess"}, true},
		{&a.memcpyPeerAsync, []string{"cuMemcpyPeerAsync"}, true},
		{&a.launchHostFunc, []string{"cuLaunchHostFunc"}, true},
		{&a.memHostAlloc, []string{"cuMemHostAlloc"}, true},
		{&a.pointerGetAttribute, []string{"cuPointerGetAttribute"}, true},
		{&a.deviceGetDevResource, []string{"cuDeviceGetDevResource"}, true},
		{&a.devSmResourceSplitByCount, []string{"cuDevSmResourceSplitByCount"}, true},
		{&a.devResourceGenerateDesc, []string{"cuDevResourceGenerateDesc"}, true},
		{&a.greenCtxCreate, []string{"cuGreenCtxCreate"}, true},
		{&a.greenCtxDestroy, []string{"cuGreenCtxDestroy"}, true},
		{&a.ctxFromGreenCtx, []string{"cuCtxFromGreenCtx"}, true},
		{&a.ctxGetDevResource, []string{"cuCtxGetDevResource"}, true},
	}
}

// bind registers syms from the loaded library lib (named name): the first
// name of each found wins; an optional one may be missing. It closes lib
// when a required one is missing.
func bind(lib uintptr, name string, syms []symbol) error {
	for _, s := range syms {
		var sym uintptr
		for _, n := range s.names {
			if p, err := purego.Dlsym(lib, n); err == nil && p != 0 {
				sym = p
				break
			}
		}
		if sym == 0 {
			if s.optional {
				continue
			}
			_ = purego.Dlclose(lib)
			return fmt.Errorf("%s lacks %s", name, s.names[0])
		}
		purego.RegisterFunc(s.fptr, sym)
	}
	return nil
}

// Open loads the CUDA driver (DefaultLibrary) and initializes it with
// cuInit. Without a usable driver it returns an error wrapping ErrNoDriver,
// which callers treat as zero devices. Open is cheap after the first call
// in a process (the library is already mapped and initialized).
func Open() (*Driver, error) {
	return OpenLibrary(DefaultLibrary)
}

// OpenLibrary is Open for a driver library at another path or soname.
func OpenLibrary(name string) (*Driver, error) {
	lib, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoDriver, err)
	}
	d := &Driver{path: name}
	if err := bind(lib, name, d.api.symbols()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoDriver, err)
	}
	if r := d.api.init(0); r != Success {
		err := d.errorf("cuInit", r)
		switch r {
		case ErrNoDevice, ErrStubLibrary:
			return nil, fmt.Errorf("%w: %w", ErrNoDriver, err)
		}
		return nil, err
	}
	var v int32
	if r := d.api.driverGetVersion(&v); r != Success {
		return nil, d.errorf("cuDriverGetVersion", r)
	}
	d.version = int(v)
	return d, nil
}

// Version returns the CUDA version the driver supports, as cuDriverGetVersion
// gives it: 1000*major + 10*minor, e.g. 12040 for CUDA 12.4. It is 0 for a
// nil Driver.
func (d *Driver) Version() int {
	if d == nil {
		return 0
	}
	return d.version
}

// Library returns the name the driver was loaded from.
func (d *Driver) Library() string {
	if d == nil {
		return ""
	}
	return d.path
}

// errorf turns a failed CUresult into an *Error, asking the driver for its
// name and description.
func (d *Driver) errorf(call string, r Result) error {
	if r == Success {
		return nil
	}
	e := &Error{Call: call, Code: r}
	var p *byte
	if d.api.getErrorName(r, &p) == Success {
		e.Name = cString(p)
	}
	p = nil
	if d.api.getErrorString(r, &p) == Success {
		e.Description = cString(p)
	}
	return e
}

// cString copies a NUL-terminated C string that the driver owns (static
// storage) into Go memory.
func cString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// check is errorf for the common "if r != Success" pattern.
func (d *Driver) check(call string, r Result) error {
	if r == Success {
		return nil
	}
	return d.errorf(call, r)
}

// IsNoDriver reports whether err means "no usable driver", so that callers
// can treat it as zero devices.
func IsNoDriver(err error) bool {
	return errors.Is(err, ErrNoDriver)
}

// OpenEnv opens the driver library named by PZ_CUDA_LIBRARY in getenv
// (os.Getenv when nil), else DefaultLibrary. Without a usable driver it
// returns nil and no error, the Driver of a machine with no GPU; a
// library that PZ_CUDA_LIBRARY names and that cannot be loaded is an
// error.
func OpenEnv(getenv func(string) string) (*Driver, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if lib := getenv("PZ_CUDA_LIBRARY"); lib != "" {
		d, err := OpenLibrary(lib)
		if err != nil {
			return nil, fmt.Errorf("cuda: PZ_CUDA_LIBRARY=%q: %w", lib, err)
		}
		return d, nil
	}
	d, err := Open()
	if IsNoDriver(err) {
		return nil, nil
	}
	return d, err
}

// Select returns the driver and the ordinals of the GPUs a program asks
// for: n of them (all when n < 0) when given, else as many as PZ_NCUDA in
// getenv says (none when it is unset or 0). It opens the driver with
// OpenEnv when d is nil; without one there are no GPUs, and no error. A
// PZ_NCUDA that is not a number is an error wrapping ErrBadArgument.
func Select(getenv func(string) string, n int, given bool, d *Driver) (*Driver, []int, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if !given {
		v := getenv("PZ_NCUDA")
		if v == "" {
			return d, nil, nil
		}
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			return d, nil, fmt.Errorf("%w: PZ_NCUDA=%q is not a number of GPUs (-1 for all)", ErrBadArgument, v)
		}
	}
	if n == 0 {
		return d, nil, nil
	}
	if d == nil {
		var err error
		if d, err = OpenEnv(getenv); err != nil || d == nil {
			return nil, nil, err
		}
	}
	ords, err := d.Ordinals(n)
	if err != nil {
		return nil, nil, fmt.Errorf("cuda: counting GPUs: %w", err)
	}
	return d, ords, nil
}

// Ordinals returns the ordinals of the first n GPUs of d (all of them
// when n < 0); none for a nil Driver.
func (d *Driver) Ordinals(n int) ([]int, error) {
	count, err := d.DeviceCount()
	if err != nil {
		return nil, err
	}
	if n >= 0 {
		count = min(count, n)
	}
	out := make([]int, count)
	for i := range out {
		out[i] = i
	}
	return out, nil
}
