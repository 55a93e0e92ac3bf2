package cuda

import (
	"context"
	"fmt"
	"runtime"
	"unsafe"
)

// Alloc allocates n bytes of device memory (cuMemAlloc_v2). Free it with
// Free, or let Close of the last holder of the primary context reclaim it.
func (c *Context) Alloc(ctx context.Context, n int) (DevicePtr, error) {
	if n <= 0 {
		return 0, fmt.Errorf("%w: Alloc of %d bytes", ErrBadArgument, n)
	}
	var p DevicePtr
	err := c.call(ctx, "cuMemAlloc_v2", func() Result { return c.d.api.memAlloc(&p, uintptr(n)) })
	return p, err
}

// Free frees device memory from Alloc (cuMemFree_v2).
func (c *Context) Free(ctx context.Context, p DevicePtr) error {
	return c.call(ctx, "cuMemFree_v2", func() Result { return c.d.api.memFree(p) })
}

// AllocHost allocates n bytes of page-locked ("pinned") host memory
// (cuMemAllocHost_v2) and returns it as a byte slice. Copies from and to
// pinned memory run at full bus speed and are truly asynchronous on a
// stream. The memory is not managed by Go: release it with FreeHost and
// do not use the slice afterwards. It is page-aligned, so Slice can view
// it as any numeric type.
func (c *Context) AllocHost(ctx context.Context, n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: AllocHost of %d bytes", ErrBadArgument, n)
	}
	var p unsafe.Pointer
	err := c.call(ctx, "cuMemAllocHost_v2", func() Result { return c.d.api.memAllocHost(&p, uintptr(n)) })
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// FreeHost frees memory from AllocHost (cuMemFreeHost). b must be the
// slice AllocHost returned (or any slice starting at the same address).
func (c *Context) FreeHost(ctx context.Context, b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: FreeHost of an empty slice", ErrBadArgument)
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	return c.call(ctx, "cuMemFreeHost", func() Result { return c.d.api.memFreeHost(p) })
}

// CopyHtoD copies src to device memory at dst (cuMemcpyHtoD_v2) and
// returns when the copy is done. src may be ordinary Go memory.
func (c *Context) CopyHtoD(ctx context.Context, dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return c.call(ctx, "cuMemcpyHtoD_v2", func() Result {
		r := c.d.api.memcpyHtoD(dst, unsafe.Pointer(unsafe.SliceData(src)), uintptr(len(src)))
		runtime.KeepAlive(src)
		return r
	})
}

// CopyDtoH copies len(dst) bytes from device memory at src into dst
// (cuMemcpyDtoH_v2) and returns when the copy is done.
func (c *Context) CopyDtoH(ctx context.Context, dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return c.call(ctx, "cuMemcpyDtoH_v2", func() Result {
		r := c.d.api.memcpyDtoH(unsafe.Pointer(unsafe.SliceData(dst)), src, uintptr(len(dst)))
		runtime.KeepAlive(dst)
		return r
	})
}

// CopyDtoD copies n bytes between device buffers (cuMemcpyDtoD_v2).
func (c *Context) CopyDtoD(ctx context.Context, dst, src DevicePtr, n int) error {
	if n < 0 {
		return fmt.Errorf("%w: CopyDtoD of %d bytes", ErrBadArgument, n)
	}
	return c.call(ctx, "cuMemcpyDtoD_v2", func() Result { return c.d.api.memcpyDtoD(dst, src, uintptr(n)) })
}

// Memset8 sets n bytes of device memory at dst to v (cuMemsetD8_v2).
func (c *Context) Memset8(ctx context.Context, dst DevicePtr, v byte, n int) error {
	if n < 0 {
		return fmt.Errorf("%w: Memset8 of %d bytes", ErrBadArgument, n)
	}
	return c.call(ctx, "cuMemsetD8_v2", func() Result { return c.d.api.memsetD8(dst, v, uintptr(n)) })
}

// CopyHtoDAsync queues a copy of src to device memory at dst on stream s
// (cuMemcpyHtoDAsync_v2); a nil s means the default stream. It returns
// once queued. With src from AllocHost the copy overlaps with host work
// and kernels; src must then stay untouched until the stream reaches the
// copy (Stream.Synchronize, or an Event). With ordinary Go memory the
// driver stages the data before returning, so the call is synchronous
// with respect to the host.
func (c *Context) CopyHtoDAsync(ctx context.Context, dst DevicePtr, src []byte, s *Stream) error {
	if len(src) == 0 {
		return nil
	}
	return c.call(ctx, "cuMemcpyHtoDAsync_v2", func() Result {
		r := c.d.api.memcpyHtoDAsync(dst, unsafe.Pointer(unsafe.SliceData(src)), uintptr(len(src)), s.h())
		runtime.KeepAlive(src)
		return r
	})
}

// CopyDtoHAsync queues a copy of len(dst) bytes from device memory at src
// into dst on stream s (cuMemcpyDtoHAsync_v2); a nil s means the default
// stream. dst should come from AllocHost and must not be read before the
// stream reaches the copy. With ordinary Go memory the driver completes
// the copy before returning.
func (c *Context) CopyDtoHAsync(ctx context.Context, dst []byte, src DevicePtr, s *Stream) error {
	if len(dst) == 0 {
		return nil
	}
	return c.call(ctx, "cuMemcpyDtoHAsync_v2", func() Result {
		r := c.d.api.memcpyDtoHAsync(unsafe.Pointer(unsafe.SliceData(dst)), src, uintptr(len(dst)), s.h())
		runtime.KeepAlive(dst)
		return r
	})
}

// Number is the set of element types Bytes and Slice convert.
type Number interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// Bytes views a numeric slice as bytes without copying, for the copy
// functions. The result aliases s.
func Bytes[T Number](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(zero)))
}

// Slice views b as a slice of T without copying, e.g. pinned memory from
// AllocHost as []float32. Trailing bytes that do not fill a T are left
// out. b must be aligned for T (AllocHost memory always is); Slice panics
// if it is not, as that is a programming error.
func Slice[T Number](b []byte) []T {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if len(b) < size {
		return nil
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%unsafe.Alignof(zero) != 0 {
		panic("cuda: Slice of a misaligned buffer")
	}
	return unsafe.Slice((*T)(p), len(b)/size)
}
