package cuda_test

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/hardware/cuda"
)

// Two workers on 16 SMs each of a GPU: each gets a green Context of its
// own, whose kernels cannot take the other's SMs, and the other workers
// of the program share the device's primary Context. (Not run as a test:
// it needs a GPU and CUDA 12.4; gpu_green_test.go runs the same steps.)
func ExampleDriver_NewGreenContext() {
	ctx := context.Background()
	d, err := cuda.Open()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	// Holding the primary context makes green contexts cheap to create.
	primary, err := d.NewContext(ctx, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer primary.Close()

	all, err := d.SMs(0) // ErrNotSupported before CUDA 12.4
	if err != nil {
		fmt.Println(err)
		return
	}
	parts, rest, err := d.SplitSMs(all, 2, 16) // rounded up to the device's granularity
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%v: two groups of %d SMs, %d left\n", all, parts[0].Count(), rest.Count())
	for _, part := range parts {
		g, err := d.NewGreenContext(ctx, 0, part)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer g.Close()
		// g.NewStream, g.LoadPTX, g.Launch: as with any Context; memory
		// from primary.Alloc may be used here.
	}
}
