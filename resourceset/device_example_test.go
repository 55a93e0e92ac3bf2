package resourceset_test

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/resourceset"
)

// Each rank opens a simulated device and describes it to the others;
// rank 1's device is then the root of a broadcast between device
// buffers. (runtimeview.WithSimDevices does the opening and describing.)
func ExampleBcastDevice() {
	ctx := context.Background()
	err := local.Run(ctx, 3, func(ctx context.Context, c comm.Comm) error {
		dev, err := accel.NewSim(0, accel.SimConfig{Memory: 1 << 20})
		if err != nil {
			return err
		}
		defer dev.Close()
		mine := &hardware.Machine{Accelerators: []hardware.Accelerator{{Name: dev.Name(), Kind: "sim", MemoryBytes: dev.Capacity()}}}
		machines, err := resourceset.Exchange(ctx, c, mine)
		if err != nil {
			return err
		}
		me, err := resourceset.New(c, c.Rank(), machines[c.Rank()], nil)
		if err != nil {
			return err
		}
		if err := me.AttachDevices([]accel.Device{dev}); err != nil {
			return err
		}
		rs1, err := resourceset.New(c, 1, machines[1], nil)
		if err != nil {
			return err
		}
		root := rs1.Devices()[0]

		buf, err := resourceset.Alloc[float32](me.Devices()[0], 3)
		if err != nil {
			return err
		}
		defer buf.Free()
		r := float32(c.Rank())
		if err := buf.CopyFrom(ctx, []float32{r, r + 0.5, r + 0.25}); err != nil {
			return err
		}
		if err := resourceset.BcastDevice(ctx, root, buf); err != nil {
			return err
		}
		out := make([]float32, 3)
		if err := buf.CopyTo(ctx, out); err != nil {
			return err
		}
		if c.Rank() == 2 {
			fmt.Println("rank 2 has", out, "from", root)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: rank 2 has [1 1.5 1.25] from device sim0 (0) of rank 1
}
