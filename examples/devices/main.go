// Command devices gives every rank a simulated accelerator of 4 MiB and
// uses it two ways: as a resource-set component, for a collective between
// device buffers (AllReduceDevice), and as a memory node of the rank's
// scheduler, whose tasks update 8 MiB of tiles on it - twice its memory,
// so tiles are evicted and written back. Every rank checks its results.
//
//	PZ_RANKS=4 go run ./examples/devices
//	go build -tags mpi -o /tmp/devices ./examples/devices && mpirun -n 2 --oversubscribe /tmp/devices
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/pzgo/pz/examples/internal/cli"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/resourceset"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler"
)

const (
	tiles   = 16
	tileLen = 64 << 10 // float64s: 512 KiB
	rounds  = 3
)

func main() {
	cli.Parse("devices", cli.NoArgs)
	err := runtimeview.Run(context.Background(), 0, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		return run(ctx, rt, os.Stdout)
	}, runtimeview.WithSimDevices(accel.SimConfig{Memory: 4 << 20}))
	if err != nil {
		log.Fatal(err)
	}
}

// run does both uses of rt's first device and checks them; rank 0 prints
// the summary line on out.
func run(ctx context.Context, rt *runtimeview.RuntimeView, out io.Writer) error {
	dev := rt.MyResourceSet().Devices()[0]

	// 1. A collective between device buffers: every rank adds its rank.
	buf, err := resourceset.Alloc[float64](dev, 1024)
	if err != nil {
		return err
	}
	defer buf.Free()
	mine := make([]float64, buf.Len())
	for i := range mine {
		mine[i] = float64(rt.Rank())
	}
	if err := buf.CopyFrom(ctx, mine); err != nil {
		return err
	}
	if err := runtimeview.AllReduceDevice(ctx, rt, buf, comm.Sum); err != nil {
		return err
	}
	if err := buf.CopyTo(ctx, mine); err != nil {
		return err
	}
	n := float64(rt.Size())
	if want := n * (n - 1) / 2; mine[1023] != want {
		return fmt.Errorf("rank %d: AllReduceDevice gave %g, want %g", rt.Rank(), mine[1023], want)
	}

	// 2. Tasks on the device, out of core: the rank's scheduler shares the
	// device with the resource set.
	d, err := rt.Scheduler(ctx)
	if err != nil {
		return err
	}
	s := d.Local()
	var devWorkers []int
	for _, w := range s.Workers() {
		if w.Kind == scheduler.SimWorker {
			devWorkers = append(devWorkers, w.ID)
		}
	}
	onDevice, err := s.NewContext("device", scheduler.ContextWorkers(devWorkers...))
	if err != nil {
		return err
	}
	data := make([]float64, tiles*tileLen)
	whole, err := s.RegisterVector(data)
	if err != nil {
		return err
	}
	parts, err := whole.Partition(scheduler.Blocks(tileLen, 1))
	if err != nil {
		return err
	}
	inc := &scheduler.Codelet{Name: "inc", CPU: func(c *scheduler.Call) error {
		for i, v := range scheduler.VectorOf[float64](c, 0) {
			scheduler.VectorOf[float64](c, 0)[i] = v + 1
		}
		return nil
	}}
	for range rounds {
		for _, row := range parts {
			if err := s.Submit(ctx, inc, scheduler.RW(row[0]), scheduler.InContext(onDevice)); err != nil {
				return err
			}
		}
	}
	if err := whole.Unpartition(); err != nil {
		return err
	}
	if err := s.WaitAll(ctx); err != nil {
		return err
	}
	if _, err := whole.Unregister(ctx); err != nil {
		return err
	}
	for i, v := range data {
		if v != rounds {
			return fmt.Errorf("rank %d: element %d is %g after %d rounds on the device", rt.Rank(), i, v, rounds)
		}
	}
	if rt.Rank() == 0 {
		var copies, evictions, writeBacks int64
		for _, t := range s.Transfers() {
			copies += t.Count
			evictions += t.Evictions
			writeBacks += t.WriteBacks
		}
		fmt.Fprintf(out, "devices over %s (%s backend): AllReduceDevice %g; %d MiB of tiles on %s (%d MiB): %d copies, %d evictions, %d written back\n",
			ranks(rt.Size()), rt.Backend(), mine[0], tiles*tileLen*8>>20, dev.Name(), dev.MemoryBytes()>>20, copies, evictions, writeBacks)
	}
	return nil
}

// ranks is "1 rank" or "n ranks".
func ranks(n int) string {
	if n == 1 {
		return "1 rank"
	}
	return fmt.Sprintf("%d ranks", n)
}
