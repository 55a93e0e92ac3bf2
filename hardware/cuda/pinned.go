package cuda

import (
	"context"
	"fmt"
	"runtime"
	"unsafe"
)

// HostAllocFlags select how AllocHostFlags allocates page-locked host
// memory (CU_MEMHOSTALLOC_*); they combine with |.
type HostAllocFlags uint32

// Flags of AllocHostFlags.
const (
	// HostAllocPortable makes the memory pinned for every context, not
	// only the one that allocated it (CU_MEMHOSTALLOC_PORTABLE).
	HostAllocPortable HostAllocFlags = 0x1
	// HostAllocDeviceMap maps the memory into the devices' address
	// space, so that kernels read and write it directly over the bus
	// ("zero-copy"); HostDevicePtr gives its device address
	// (CU_MEMHOSTALLOC_DEVICEMAP).
	HostAllocDeviceMap HostAllocFlags = 0x2
	// HostAllocWriteCombined allocates write-combined memory: faster for
	// the host to write and for the device to read over PCIe, very slow
	// for the host to read (CU_MEMHOSTALLOC_WRITECOMBINED).
	HostAllocWriteCombined HostAllocFlags = 0x4
)

// Attributes of a pointer (CUpointer_attribute) that IsPinned and
// HostDevicePtr ask for.
const (
	pointerAttrMemoryType    int32 = 2 // CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a CUmemorytype
	pointerAttrDevicePointer int32 = 3 // CU_POINTER_ATTRIBUTE_DEVICE_POINTER, a CUdeviceptr
)

// AllocHostFlags is AllocHost with flags (cuMemHostAlloc): n bytes of
// page-locked host memory, released with FreeHost. It returns an error
// wrapping ErrNotSupported when the driver lacks cuMemHostAlloc.
func (c *Context) AllocHostFlags(ctx context.Context, n int, flags HostAllocFlags) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: AllocHostFlags of %d bytes", ErrBadArgument, n)
	}
	if c.d.api.memHostAlloc == nil {
		return nil, c.d.unsupported("cuMemHostAlloc")
	}
	var p unsafe.Pointer
	err := c.call(ctx, "cuMemHostAlloc", func() Result { return c.d.api.memHostAlloc(&p, uintptr(n), uint32(flags)) })
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// IsPinned reports whether b lies in page-locked host memory the driver
// knows: from AllocHost, AllocHostFlags or HostRegister, in any context.
// Asynchronous copies from and to such memory overlap with other work;
// with pageable memory (an ordinary Go slice) the driver stages them and
// they block the caller. It asks for the memory type of b's first and
// last byte (cuPointerGetAttribute with CU_POINTER_ATTRIBUTE_MEMORY_TYPE),
// which the driver refuses, with CUDA_ERROR_INVALID_VALUE, for memory it
// does not know: that means false, not an error. An empty b is not
// pinned. It returns an error wrapping ErrNotSupported when the driver
// lacks cuPointerGetAttribute.
func (c *Context) IsPinned(ctx context.Context, b []byte) (bool, error) {
	if len(b) == 0 {
		return false, nil
	}
	if c.d.api.pointerGetAttribute == nil {
		return false, c.d.unsupported("cuPointerGetAttribute")
	}
	first := unsafe.Pointer(unsafe.SliceData(b))
	ends := [2]uintptr{uintptr(first), uintptr(unsafe.Add(first, len(b)-1))}
	pinned := true
	err := c.Do(ctx, func() error {
		for _, p := range ends {
			var t uint32 // CUmemorytype, a C enum
			r := c.d.api.pointerGetAttribute(unsafe.Pointer(&t), pointerAttrMemoryType, p)
			if r == ErrInvalidValue || (r == Success && t != uint32(memoryTypeHost)) {
				pinned = false
				return nil
			}
			if err := c.d.check("cuPointerGetAttribute", r); err != nil {
				return err
			}
		}
		return nil
	})
	runtime.KeepAlive(b)
	if err != nil {
		return false, err
	}
	return pinned, nil
}

// HostDevicePtr returns the device address of mapped host memory, such as
// AllocHostFlags memory with HostAllocDeviceMap, for kernels to use
// (cuPointerGetAttribute with CU_POINTER_ATTRIBUTE_DEVICE_POINTER). Under
// unified addressing (every 64-bit platform CUDA supports) it is b's host
// address. Memory the driver has not mapped gives an error wrapping
// ErrInvalidValue; a driver without cuPointerGetAttribute, one wrapping
// ErrNotSupported.
func (c *Context) HostDevicePtr(ctx context.Context, b []byte) (DevicePtr, error) {
	if len(b) == 0 {
		return 0, fmt.Errorf("%w: HostDevicePtr of an empty slice", ErrBadArgument)
	}
	if c.d.api.pointerGetAttribute == nil {
		return 0, c.d.unsupported("cuPointerGetAttribute")
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	var d DevicePtr
	err := c.call(ctx, "cuPointerGetAttribute", func() Result {
		return c.d.api.pointerGetAttribute(unsafe.Pointer(&d), pointerAttrDevicePointer, p)
	})
	runtime.KeepAlive(b)
	return d, err
}
