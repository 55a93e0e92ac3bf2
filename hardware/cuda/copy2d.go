package cuda

import (
	"context"
	"fmt"
	"runtime"
	"unsafe"
)

// Memory types of a CUDA_MEMCPY2D side (CUmemorytype).
const (
	memoryTypeHost   int32 = 1 // CU_MEMORYTYPE_HOST
	memoryTypeDevice int32 = 2 // CU_MEMORYTYPE_DEVICE
)

// memcpy2D is CUDA_MEMCPY2D from cuda.h, 128 bytes on 64-bit hosts:
//
//	size_t srcXInBytes, srcY; CUmemorytype srcMemoryType; const void *srcHost;
//	CUdeviceptr srcDevice; CUarray srcArray; size_t srcPitch;
//	size_t dstXInBytes, dstY; CUmemorytype dstMemoryType; void *dstHost;
//	CUdeviceptr dstDevice; CUarray dstArray; size_t dstPitch;
//	size_t WidthInBytes, Height;
//
// CUmemorytype is a C enum (4 bytes); the compiler pads it to the next
// pointer, as the explicit padding fields do here.
type memcpy2D struct {
	srcXInBytes, srcY uintptr
	srcMemoryType     int32
	_                 int32
	srcHost           unsafe.Pointer
	srcDevice         DevicePtr
	srcArray          uintptr
	srcPitch          uintptr
	dstXInBytes, dstY uintptr
	dstMemoryType     int32
	_                 int32
	dstHost           unsafe.Pointer
	dstDevice         DevicePtr
	dstArray          uintptr
	dstPitch          uintptr
	widthInBytes      uintptr
	height            uintptr
}

// A Copy2D describes a copy of Rows rows of Width bytes between host
// memory, whose rows start Pitch bytes apart, and device memory, whose
// rows start DevicePitch bytes apart (Width for dense rows). It is how a
// tile of a larger row-major matrix in host memory becomes a dense block
// on the device and back.
type Copy2D struct {
	Host        []byte    // the host side: its first row starts at Host[0]
	Pitch       int       // bytes between the starts of two host rows
	Device      DevicePtr // the device side: its first row
	DevicePitch int       // bytes between the starts of two device rows; 0 means Width
	Rows, Width int       // rows, and bytes per row
}

// check validates the shape against the host slice.
func (c *Copy2D) check(call string) error {
	if c.Rows < 0 || c.Width < 0 {
		return fmt.Errorf("%w: %s of %d rows of %d bytes", ErrBadArgument, call, c.Rows, c.Width)
	}
	if c.Rows == 0 || c.Width == 0 {
		return nil
	}
	if c.Pitch < c.Width || (c.DevicePitch != 0 && c.DevicePitch < c.Width) {
		return fmt.Errorf("%w: %s: pitch %d (device %d) below the width %d", ErrBadArgument, call, c.Pitch, c.DevicePitch, c.Width)
	}
	if need := (c.Rows-1)*c.Pitch + c.Width; len(c.Host) < need {
		return fmt.Errorf("%w: %s: %d rows of %d bytes, pitch %d, need %d host bytes, have %d",
			ErrBadArgument, call, c.Rows, c.Width, c.Pitch, need, len(c.Host))
	}
	return nil
}

// params fills the driver's description of the copy; toDevice says
// which way it goes.
func (c *Copy2D) params(toDevice bool) memcpy2D {
	dp := c.DevicePitch
	if dp == 0 {
		dp = c.Width
	}
	p := memcpy2D{widthInBytes: uintptr(c.Width), height: uintptr(c.Rows)}
	host := unsafe.Pointer(unsafe.SliceData(c.Host))
	if toDevice {
		p.srcMemoryType, p.srcHost, p.srcPitch = memoryTypeHost, host, uintptr(c.Pitch)
		p.dstMemoryType, p.dstDevice, p.dstPitch = memoryTypeDevice, c.Device, uintptr(dp)
	} else {
		p.srcMemoryType, p.srcDevice, p.srcPitch = memoryTypeDevice, c.Device, uintptr(dp)
		p.dstMemoryType, p.dstHost, p.dstPitch = memoryTypeHost, host, uintptr(c.Pitch)
	}
	return p
}

// copy2D runs one 2-D copy, synchronous when s is nil and sync is true,
// else queued on s (cuMemcpy2DAsync_v2). The description and the host
// memory are pinned for the call, so the driver may read them.
func (c *Context) copy2D(ctx context.Context, cp Copy2D, toDevice, async bool, s *Stream) error {
	name := "cuMemcpy2D_v2"
	if async {
		name = "cuMemcpy2DAsync_v2"
	}
	if err := cp.check(name); err != nil {
		return err
	}
	if cp.Rows == 0 || cp.Width == 0 {
		return nil
	}
	return c.call(ctx, name, func() Result {
		p := cp.params(toDevice)
		var pin runtime.Pinner
		pin.Pin(&p)
		pin.Pin(unsafe.SliceData(cp.Host))
		defer pin.Unpin()
		if async {
			return c.d.api.memcpy2DAsync(&p, s.h())
		}
		return c.d.api.memcpy2D(&p)
	})
}

// CopyHtoD2D copies a 2-D block from host to device memory
// (cuMemcpy2D_v2) and returns when it is done.
func (c *Context) CopyHtoD2D(ctx context.Context, cp Copy2D) error {
	return c.copy2D(ctx, cp, true, false, nil)
}

// CopyDtoH2D copies a 2-D block from device to host memory
// (cuMemcpy2D_v2) and returns when it is done.
func (c *Context) CopyDtoH2D(ctx context.Context, cp Copy2D) error {
	return c.copy2D(ctx, cp, false, false, nil)
}

// CopyHtoD2DAsync queues a 2-D copy from host to device memory on s
// (cuMemcpy2DAsync_v2). As with CopyHtoDAsync, host memory from
// AllocHost or HostRegister makes it truly asynchronous; ordinary Go
// memory is staged by the driver before the call returns.
func (c *Context) CopyHtoD2DAsync(ctx context.Context, cp Copy2D, s *Stream) error {
	return c.copy2D(ctx, cp, true, true, s)
}

// CopyDtoH2DAsync queues a 2-D copy from device to host memory on s
// (cuMemcpy2DAsync_v2); with ordinary Go memory the driver completes it
// before returning.
func (c *Context) CopyDtoH2DAsync(ctx context.Context, cp Copy2D, s *Stream) error {
	return c.copy2D(ctx, cp, false, true, s)
}

// CopyDtoDAsync queues a copy of n bytes between device buffers on s
// (cuMemcpyDtoDAsync_v2).
func (c *Context) CopyDtoDAsync(ctx context.Context, dst, src DevicePtr, n int, s *Stream) error {
	if n < 0 {
		return fmt.Errorf("%w: CopyDtoDAsync of %d bytes", ErrBadArgument, n)
	}
	if n == 0 {
		return nil
	}
	return c.call(ctx, "cuMemcpyDtoDAsync_v2", func() Result { return c.d.api.memcpyDtoDAsync(dst, src, uintptr(n), s.h()) })
}

// Memset8Async queues setting n bytes at dst to v on s (cuMemsetD8Async).
func (c *Context) Memset8Async(ctx context.Context, dst DevicePtr, v byte, n int, s *Stream) error {
	if n < 0 {
		return fmt.Errorf("%w: Memset8Async of %d bytes", ErrBadArgument, n)
	}
	return c.call(ctx, "cuMemsetD8Async", func() Result { return c.d.api.memsetD8Async(dst, v, uintptr(n), s.h()) })
}

// HostRegister page-locks b (cuMemHostRegister_v2), so that asynchronous
// copies from and to it overlap with other work. b must stay reachable
// and must not move: pass memory that is not managed by Go's garbage
// collector, or keep a runtime.Pinner on it until HostUnregister.
func (c *Context) HostRegister(ctx context.Context, b []byte) error {
	return c.HostRegisterFlags(ctx, b, 0)
}

// HostRegisterFlags select how HostRegisterFlags page-locks memory
// (CU_MEMHOSTREGISTER_*).
type HostRegisterFlags uint32

// HostRegisterPortable makes the memory pinned for every context, not
// only the one that registered it (CU_MEMHOSTREGISTER_PORTABLE): what
// memory that several GPUs copy from and to needs.
const HostRegisterPortable HostRegisterFlags = 0x1

// HostRegisterFlags is HostRegister with flags.
func (c *Context) HostRegisterFlags(ctx context.Context, b []byte, flags HostRegisterFlags) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: HostRegister of an empty slice", ErrBadArgument)
	}
	return c.call(ctx, "cuMemHostRegister_v2", func() Result {
		return c.d.api.memHostRegister(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)), uint32(flags))
	})
}

// HostUnregister undoes HostRegister (cuMemHostUnregister).
func (c *Context) HostUnregister(ctx context.Context, b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: HostUnregister of an empty slice", ErrBadArgument)
	}
	return c.call(ctx, "cuMemHostUnregister", func() Result { return c.d.api.memHostUnregister(unsafe.Pointer(unsafe.SliceData(b))) })
}

// WaitEvent makes later work queued on s wait until e has completed
// (cuStreamWaitEvent), without blocking the host: how work on one stream
// follows work on another.
func (s *Stream) WaitEvent(ctx context.Context, e *Event) error {
	if s == nil || e == nil {
		return fmt.Errorf("%w: WaitEvent with a nil Stream or Event", ErrBadArgument)
	}
	return s.c.call(ctx, "cuStreamWaitEvent", func() Result { return s.c.d.api.streamWaitEvent(s.handle, e.handle, 0) })
}

// Handle returns the raw CUstream, for libraries bound separately that
// take one (cublasSetStream_v2, say); 0 for the default stream (nil).
func (s *Stream) Handle() uintptr { return s.h() }

// Handle returns the raw CUcontext (the device's primary context).
func (c *Context) Handle() uintptr { return c.handle }
