package cuda

import (
	"context"
	"fmt"
)

// CanAccessPeer reports whether kernels on device ordinal can use the
// memory of device peer directly, over NVLink or PCIe, once
// Context.EnablePeerAccess allows it (cuDeviceCanAccessPeer). A device is
// not its own peer. It returns an error wrapping ErrNoDriver for a nil
// Driver and ErrNotSupported when the driver lacks the entry point.
func (d *Driver) CanAccessPeer(ordinal, peer int) (bool, error) {
	dev, err := d.device(ordinal)
	if err != nil {
		return false, err
	}
	pdev, err := d.device(peer)
	if err != nil {
		return false, err
	}
	if d.api.deviceCanAccessPeer == nil {
		return false, d.unsupported("cuDeviceCanAccessPeer")
	}
	var can int32
	if err := d.check("cuDeviceCanAccessPeer", d.api.deviceCanAccessPeer(&can, dev, pdev)); err != nil {
		return false, fmt.Errorf("devices %d and %d: %w", ordinal, peer, err)
	}
	return can != 0, nil
}

// EnablePeerAccess lets kernels running in c use memory allocated in peer,
// a Context of another device, directly (cuCtxEnablePeerAccess). Access
// is one way: peer's kernels need peer.EnablePeerAccess(ctx, c) to use
// c's memory. It lasts until DisablePeerAccess or until either primary
// context is destroyed.
//
// Contexts of one device share its primary context, so access enabled
// through one holds for all. Enabling it again returns an error wrapping
// ErrPeerAccessAlreadyEnabled, which callers that only need access to be
// on may ignore; a device without access to peer's (CanAccessPeer false)
// gives ErrPeerAccessUnsupported, and peer of c's own device
// ErrInvalidContext. CopyPeerAsync does not need peer access.
func (c *Context) EnablePeerAccess(ctx context.Context, peer *Context) error {
	if peer == nil {
		return fmt.Errorf("%w: EnablePeerAccess with a nil peer", ErrBadArgument)
	}
	if c.d.api.ctxEnablePeerAccess == nil {
		return c.d.unsupported("cuCtxEnablePeerAccess")
	}
	err := c.call(ctx, "cuCtxEnablePeerAccess", func() Result { return c.d.api.ctxEnablePeerAccess(peer.handle, 0) })
	if err != nil {
		return fmt.Errorf("device %d to device %d: %w", c.ordinal, peer.ordinal, err)
	}
	return nil
}

// DisablePeerAccess revokes what EnablePeerAccess(ctx, peer) granted
// (cuCtxDisablePeerAccess). It returns an error wrapping
// ErrPeerAccessNotEnabled if access was not enabled.
func (c *Context) DisablePeerAccess(ctx context.Context, peer *Context) error {
	if peer == nil {
		return fmt.Errorf("%w: DisablePeerAccess with a nil peer", ErrBadArgument)
	}
	if c.d.api.ctxDisablePeerAccess == nil {
		return c.d.unsupported("cuCtxDisablePeerAccess")
	}
	err := c.call(ctx, "cuCtxDisablePeerAccess", func() Result { return c.d.api.ctxDisablePeerAccess(peer.handle) })
	if err != nil {
		return fmt.Errorf("device %d to device %d: %w", c.ordinal, peer.ordinal, err)
	}
	return nil
}

// CopyPeerAsync queues a copy of n bytes from src, memory of srcCtx's
// device, to dst, memory of dstCtx's device, on stream s of c
// (cuMemcpyPeerAsync); a nil s means c's default stream. c is usually
// one of the two. The copy is ordered on s only: work on the other
// device that produces src or consumes dst must be ordered with it
// through events. With peer access enabled the copy goes directly
// between the devices; without, the driver stages it through host
// memory, slower but still asynchronous.
func (c *Context) CopyPeerAsync(ctx context.Context, dst DevicePtr, dstCtx *Context, src DevicePtr, srcCtx *Context, n int, s *Stream) error {
	if dstCtx == nil || srcCtx == nil {
		return fmt.Errorf("%w: CopyPeerAsync with a nil Context", ErrBadArgument)
	}
	if n < 0 {
		return fmt.Errorf("%w: CopyPeerAsync of %d bytes", ErrBadArgument, n)
	}
	if n == 0 {
		return nil
	}
	if c.d.api.memcpyPeerAsync == nil {
		return c.d.unsupported("cuMemcpyPeerAsync")
	}
	return c.call(ctx, "cuMemcpyPeerAsync", func() Result {
		return c.d.api.memcpyPeerAsync(dst, dstCtx.handle, src, srcCtx.handle, uintptr(n), s.h())
	})
}
