package cuda

import (
	"context"
	"fmt"
	"unsafe"
)

// Attributes of a memory pool (CUmemPool_attribute) that MemPool reads
// and sets; all three are cuuint64_t.
const (
	memPoolAttrReleaseThreshold   int32 = 4 // CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
	memPoolAttrReservedMemCurrent int32 = 5 // CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT
	memPoolAttrUsedMemCurrent     int32 = 7 // CU_MEMPOOL_ATTR_USED_MEM_CURRENT
)

// A MemPool is a device's default memory pool (CUmemoryPool), the one
// AllocAsync allocates from. The pool reserves device memory from the
// driver, hands it out, and takes it back when FreeAsync's stream
// reaches the free; it keeps memory freed to it, for later allocations,
// up to its release threshold, and releases the rest. Reserved memory
// counts as used in MemInfo, whether allocated or kept.
//
// All Contexts of a device share its default pool. A MemPool's methods go
// through its Context, like those of a Stream.
type MemPool struct {
	c      *Context
	handle uintptr // the CUmemoryPool
}

// DefaultMemPool returns the default memory pool of the Context's device
// (cuDeviceGetDefaultMemPool). It returns an error wrapping
// ErrNotSupported when the driver predates memory pools (CUDA 11.2) or
// the device has none.
func (c *Context) DefaultMemPool(ctx context.Context) (*MemPool, error) {
	if c.d.api.deviceGetDefaultMemPool == nil {
		return nil, c.d.unsupported("cuDeviceGetDefaultMemPool")
	}
	p := &MemPool{c: c}
	err := c.call(ctx, "cuDeviceGetDefaultMemPool", func() Result { return c.d.api.deviceGetDefaultMemPool(&p.handle, c.dev) })
	if err != nil {
		return nil, err
	}
	return p, nil
}

// AllocAsync allocates n bytes of device memory from the device's default
// pool, ordered on stream s (cuMemAllocAsync); a nil s means the default
// stream. The address is returned at once, but the memory exists from
// that point of the stream on: work queued on s after this call may use
// it, work on other streams only once it waits for s (Stream.WaitEvent).
// Release it with FreeAsync (or Free, which waits for the device). An
// allocation that memory the pool keeps can serve costs no driver
// allocation, which makes AllocAsync cheap enough for per-task buffers.
//
// It returns an error wrapping ErrNotSupported when the driver predates
// stream-ordered allocation (CUDA 11.2) or the device does not support
// it.
func (c *Context) AllocAsync(ctx context.Context, n int, s *Stream) (DevicePtr, error) {
	if n <= 0 {
		return 0, fmt.Errorf("%w: AllocAsync of %d bytes", ErrBadArgument, n)
	}
	if c.d.api.memAllocAsync == nil {
		return 0, c.d.unsupported("cuMemAllocAsync")
	}
	var p DevicePtr
	err := c.call(ctx, "cuMemAllocAsync", func() Result { return c.d.api.memAllocAsync(&p, uintptr(n), s.h()) })
	return p, err
}

// FreeAsync frees p at this point of stream s (cuMemFreeAsync); a nil s
// means the default stream. Work queued on s before the call may still
// use p; work queued after it, or on streams that do not wait for s,
// must not. The memory returns to its pool when s reaches the free. p
// may come from AllocAsync or Alloc. It returns an error wrapping
// ErrNotSupported when the driver lacks cuMemFreeAsync.
func (c *Context) FreeAsync(ctx context.Context, p DevicePtr, s *Stream) error {
	if c.d.api.memFreeAsync == nil {
		return c.d.unsupported("cuMemFreeAsync")
	}
	return c.call(ctx, "cuMemFreeAsync", func() Result { return c.d.api.memFreeAsync(p, s.h()) })
}

// ReleaseThreshold returns how many bytes of reserved memory the pool
// keeps before it releases memory to the driver
// (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD; 0 by default, which releases freed
// memory at the next synchronization).
func (p *MemPool) ReleaseThreshold(ctx context.Context) (uint64, error) {
	return p.attribute(ctx, memPoolAttrReleaseThreshold)
}

// SetReleaseThreshold sets how many bytes of reserved memory the pool
// keeps (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD). Above it, the driver
// releases memory freed to the pool at the next synchronization (stream,
// event or context); math.MaxUint64 keeps everything until TrimTo.
func (p *MemPool) SetReleaseThreshold(ctx context.Context, bytes uint64) error {
	if p.c.d.api.memPoolSetAttribute == nil {
		return p.c.d.unsupported("cuMemPoolSetAttribute")
	}
	return p.c.call(ctx, "cuMemPoolSetAttribute", func() Result {
		return p.c.d.api.memPoolSetAttribute(p.handle, memPoolAttrReleaseThreshold, unsafe.Pointer(&bytes))
	})
}

// Reserved returns the device memory the pool holds, allocated or kept
// (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT).
func (p *MemPool) Reserved(ctx context.Context) (uint64, error) {
	return p.attribute(ctx, memPoolAttrReservedMemCurrent)
}

// Used returns the pool's memory that allocations hold
// (CU_MEMPOOL_ATTR_USED_MEM_CURRENT).
func (p *MemPool) Used(ctx context.Context) (uint64, error) {
	return p.attribute(ctx, memPoolAttrUsedMemCurrent)
}

// TrimTo releases memory the pool keeps, but no allocation holds, to the
// driver until keep bytes remain reserved or nothing more can go
// (cuMemPoolTrimTo). Memory of outstanding allocations, and of frees that
// their stream has not reached, stays.
func (p *MemPool) TrimTo(ctx context.Context, keep uint64) error {
	if p.c.d.api.memPoolTrimTo == nil {
		return p.c.d.unsupported("cuMemPoolTrimTo")
	}
	return p.c.call(ctx, "cuMemPoolTrimTo", func() Result { return p.c.d.api.memPoolTrimTo(p.handle, uintptr(keep)) })
}

// attribute reads a cuuint64_t attribute of the pool.
func (p *MemPool) attribute(ctx context.Context, attr int32) (uint64, error) {
	if p.c.d.api.memPoolGetAttribute == nil {
		return 0, p.c.d.unsupported("cuMemPoolGetAttribute")
	}
	var v uint64
	err := p.c.call(ctx, "cuMemPoolGetAttribute", func() Result {
		return p.c.d.api.memPoolGetAttribute(p.handle, attr, unsafe.Pointer(&v))
	})
	if err != nil {
		return 0, fmt.Errorf("memory pool attribute %d: %w", attr, err)
	}
	return v, nil
}

// Handle returns the raw CUmemoryPool, for libraries bound separately
// that take one.
func (p *MemPool) Handle() uintptr { return p.handle }
