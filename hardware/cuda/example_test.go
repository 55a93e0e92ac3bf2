package cuda_test

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/hardware/cuda"
)

// Open finds the driver library at run time; where it is missing (here a
// library name that no machine has), the error says so and the nil
// *Driver it returns lists no devices, so that a program lists GPUs the
// same way with and without a driver.
func Example() {
	d, err := cuda.OpenLibrary("libcuda-missing.so.1")
	fmt.Println("no driver:", cuda.IsNoDriver(err))
	n, err := d.DeviceCount()
	fmt.Println("devices:", n, err)
	devs, err := d.Devices()
	fmt.Println("listed:", len(devs), err)
	// With a driver (cuda.Open()), each device is described:
	for _, dev := range devs {
		fmt.Printf("%d: %s, %d SMs, compute %s, %d MiB, %s\n",
			dev.Ordinal, dev.Name, dev.SMCount, dev.ComputeCapability(), dev.TotalMemoryBytes>>20, dev.PCIBusID)
	}
	// Output:
	// no driver: true
	// devices: 0 <nil>
	// listed: 0 <nil>
}

// A vector addition: pinned buffers, a non-blocking stream, a PTX kernel.
// (Not run as a test: it needs a GPU; gpu_test.go runs the same steps.)
func ExampleContext() {
	ctx := context.Background()
	d, err := cuda.Open()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	c, err := d.NewContext(ctx, 0) // device 0's primary context, on its own OS thread
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	const n = 1 << 20
	host, _ := c.AllocHost(ctx, 4*n) // pinned
	defer c.FreeHost(ctx, host)
	x := cuda.Slice[float32](host)
	for i := range x {
		x[i] = float32(i)
	}
	a, _ := c.Alloc(ctx, 4*n)
	defer c.Free(ctx, a)
	out, _ := c.Alloc(ctx, 4*n)
	defer c.Free(ctx, out)

	s, _ := c.NewStream(ctx) // CU_STREAM_NON_BLOCKING
	defer s.Destroy(ctx)
	mod, err := c.LoadPTX(ctx, testPTX) // JIT-compiled for the device
	if err != nil {
		fmt.Println(err) // includes the compiler log
		return
	}
	vadd, _ := mod.Function(ctx, "vadd")
	_ = c.CopyHtoDAsync(ctx, a, host, s)
	_ = c.Launch(ctx, vadd, cuda.Dim3{X: n / 256}, cuda.Dim3{X: 256}, 0, s, a, a, out, uint32(n))
	_ = c.CopyDtoHAsync(ctx, host, out, s)
	if err := s.Synchronize(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(x[3]) // 6
}
