package resourceset_test

import (
	"context"
	"fmt"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/resourceset"
)

// Example gathers every rank's data to rank 2 through rank 2's RAM. In a
// program, the resource sets come from runtimeview: rt.ResourceSet(2).
func Example() {
	ctx := context.Background()
	err := local.Run(ctx, 4, func(ctx context.Context, c comm.Comm) error {
		// Each rank describes its machine (here a made-up one) to the others.
		mine := &hardware.Machine{Host: hardware.Host{Hostname: fmt.Sprintf("node%d", c.Rank())}}
		machines, err := resourceset.Exchange(ctx, c, mine)
		if err != nil {
			return err
		}
		root, err := resourceset.New(c, 2, machines[2], nil)
		if err != nil {
			return err
		}

		data := []float64{float64(c.Rank()), float64(c.Rank() * c.Rank())}
		parts, ok, err := resourceset.Gather(ctx, root.RAM(), data)
		if err != nil {
			return err
		}
		if !ok {
			return nil // not the root: nothing was gathered here
		}
		fmt.Println("gathered on", root.Host().Hostname)
		for r, p := range parts {
			fmt.Printf("rank %d sent %v\n", r, p)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// gathered on node2
	// rank 0 sent [0 0]
	// rank 1 sent [1 1]
	// rank 2 sent [2 4]
	// rank 3 sent [3 9]
}
