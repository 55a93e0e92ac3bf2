package fakecuda_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/fakecuda"
)

// axpyPTX names the built-in kernel that the module gives: the
// stand-in runs the kernels it knows by name, on the host.
const axpyPTX = `.version 7.0
.target sm_80
.address_size 64
.visible .entry pz_axpy_f64(.param .u64 y, .param .f64 a, .param .u64 x, .param .u64 n) { ret; }
`

// hardware/cuda on the stand-in driver, on a machine without a GPU: two
// devices as the environment sets them, device memory that is not host
// memory (fresh, it holds 0xA5 bytes), a kernel run on a stream, and the
// driver's counters of what the program did.
func Example() {
	lib, err := fakecuda.Compile() // a test calls fakecuda.Open(t, 2, 64<<20)
	if err != nil {
		fmt.Println(err)
		return
	}
	// A file of its own is an instance of its own, counters at zero.
	dir, err := os.MkdirTemp("", "pz-fakecuda-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	b, err := os.ReadFile(lib)
	if err != nil {
		fmt.Println(err)
		return
	}
	lib = filepath.Join(dir, fakecuda.LibraryName)
	if err := os.WriteFile(lib, b, 0o755); err != nil {
		fmt.Println(err)
		return
	}
	os.Setenv(fakecuda.EnvDevices, "2")
	os.Setenv(fakecuda.EnvMemory, strconv.Itoa(64<<20))
	defer os.Unsetenv(fakecuda.EnvDevices)
	defer os.Unsetenv(fakecuda.EnvMemory)

	d, err := cuda.OpenLibrary(lib)
	if err != nil {
		fmt.Println(err)
		return
	}
	devs, err := d.Devices()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, dev := range devs {
		fmt.Printf("device %d: %d MiB\n", dev.Ordinal, dev.TotalMemoryBytes>>20)
	}

	ctx := context.Background()
	c, err := d.NewContext(ctx, 1) // device 1's primary context, on an OS thread of its own
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	const n = 4
	x := []float64{1, 2, 3, 4}
	y := []float64{10, 20, 30, 40}
	dx, _ := c.Alloc(ctx, 8*n)
	dy, _ := c.Alloc(ctx, 8*n)
	fresh := make([]byte, 4)
	_ = c.CopyDtoH(ctx, fresh, dx)
	fmt.Printf("fresh device memory: % x\n", fresh)
	free, _, _ := c.MemInfo(ctx)
	fmt.Printf("used: %d B\n", 64<<20-free)

	_ = c.CopyHtoD(ctx, dx, cuda.Bytes(x))
	_ = c.CopyHtoD(ctx, dy, cuda.Bytes(y))
	mod, err := c.LoadPTX(ctx, axpyPTX)
	if err != nil {
		fmt.Println(err)
		return
	}
	axpy, err := mod.Function(ctx, "pz_axpy_f64")
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := c.NewStream(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Destroy(ctx)
	// y += 0.5*x, one thread per element.
	if err := c.Launch(ctx, axpy, cuda.Dim3{X: 1}, cuda.Dim3{X: n}, 0, s, dy, 0.5, dx, uint64(n)); err != nil {
		fmt.Println(err)
		return
	}
	if err := s.Synchronize(ctx); err != nil {
		fmt.Println(err)
		return
	}
	out := make([]float64, n)
	_ = c.CopyDtoH(ctx, cuda.Bytes(out), dy)
	fmt.Println("y + 0.5x:", out)

	st, _ := fakecuda.Stats(lib)
	fmt.Printf("live: %d allocations, %d B; copies: %d to device, %d to host; kernels: %d\n",
		st.LiveAllocations, st.LiveBytes, st.HtoD, st.DtoH, st.Kernels)
	_ = c.Free(ctx, dx)
	_ = c.Free(ctx, dy)
	st, _ = fakecuda.Stats(lib)
	fmt.Printf("after Free: %d allocations; calls without a current context: %d\n", st.LiveAllocations, st.InvalidContext)
	// Output:
	// device 0: 64 MiB
	// device 1: 64 MiB
	// fresh device memory: a5 a5 a5 a5
	// used: 64 B
	// y + 0.5x: [10.5 21 31.5 42]
	// live: 2 allocations, 64 B; copies: 2 to device, 2 to host; kernels: 1
	// after Free: 0 allocations; calls without a current context: 0
}
