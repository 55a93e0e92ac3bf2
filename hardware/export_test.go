package hardware

import (
	"context"

	"github.com/pzgo/pz/hardware/cuda"
)

// WithContextFreeMemory replaces the way Discover reads a device's free
// memory through a CUDA context, so that tests can make it fail as it does
// on a GPU in exclusive-process mode that another process holds, or count
// its calls.
func WithContextFreeMemory(f func(ctx context.Context, d *cuda.Driver, ordinal int) (uint64, error)) Option {
	return func(c *config) { c.contextFree = f }
}

// NVMLMemory is nvmlMemory, for tests of the PCI bus id path (the
// stand-in CUDA driver always reports UUIDs).
var NVMLMemory = nvmlMemory
