package runtimeview_test

import (
	"context"
	"fmt"
	"log"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/hardware/accel"
	"github.com/pzgo/pz/resourceset"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// A program's main: the MPI world under mpirun (built with -tags mpi),
// one rank otherwise. Not run as a test: it would claim the process's MPI.
func ExampleNew() {
	ctx := context.Background()
	rt, err := runtimeview.New(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close()

	sum, err := runtimeview.AllReduce(ctx, rt, []float64{float64(rt.Rank())}, comm.Sum)
	if err != nil {
		log.Fatal(err)
	}
	rt.Logger().Info(fmt.Sprintf("sum of ranks: %v", sum[0])) // printed by rank 0 only
}

// Run is a program's main function for both launches: under mpirun (a
// binary built with -tags mpi, n = 0) one rank per process; otherwise n
// in-process ranks (0: PZ_RANKS, default 1), as here with three. Each
// rank's view is closed when fn returns; Run returns the ranks' errors.
func ExampleRun() {
	var sums [3]int64 // each rank's result, printed after Run
	err := runtimeview.Run(context.Background(), 3, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		sum, err := runtimeview.AllReduce(ctx, rt, []int64{int64(10 * (rt.Rank() + 1))}, comm.Sum)
		if err != nil {
			return err
		}
		sums[rt.Rank()] = sum[0]
		return nil
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()))
	fmt.Println("every rank's sum:", sums, "error:", err)
	// Output: every rank's sum: [60 60 60] error: <nil>
}

// AllReduce on four in-process ranks; rank 0 prints the result.
func ExampleAllReduce() {
	err := runtimeview.RunLocal(context.Background(), 4, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		mine := []int64{int64(rt.Rank()), 1}
		sum, err := runtimeview.AllReduce(ctx, rt, mine, comm.Sum)
		if err != nil {
			return err
		}
		if rt.Rank() == 0 {
			fmt.Println("sum of ranks:", sum[0], "ranks:", sum[1])
		}
		return nil
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()))
	if err != nil {
		fmt.Println(err)
	}
	// Output: sum of ranks: 6 ranks: 4
}

// StackCallback ties a library's teardown to the runtime: Close runs the
// callbacks last pushed first. RunLocal closes each rank's view when its
// function returns.
func ExampleRuntimeView_StackCallback() {
	err := runtimeview.RunLocal(context.Background(), 1, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		fmt.Println("initialize solver, then plotter")
		if err := rt.StackCallback(func() error { fmt.Println("finalize solver"); return nil }); err != nil {
			return err
		}
		return rt.StackCallback(func() error { fmt.Println("finalize plotter"); return nil })
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()))
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// initialize solver, then plotter
	// finalize plotter
	// finalize solver
}

// A rooted gather through rank 2's resource set: only rank 2 gets the
// result.
func ExampleRuntimeView_ResourceSet() {
	err := runtimeview.RunLocal(context.Background(), 3, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		root := rt.ResourceSet(2)
		parts, ok, err := resourceset.Gather(ctx, root.RAM(), []int32{int32(10 * rt.Rank())})
		if err != nil {
			return err
		}
		if ok {
			fmt.Println("rank", rt.Rank(), "gathered", parts)
		}
		return nil
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()))
	if err != nil {
		fmt.Println(err)
	}
	// Output: rank 2 gathered [[0] [10] [20]]
}

// Every in-process rank gets a simulated device; each puts its rank
// number on it, and AllReduceDevice sums the device buffers in place.
func ExampleAllReduceDevice() {
	err := runtimeview.RunLocal(context.Background(), 3, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		dev := rt.MyResourceSet().Devices()[0]
		buf, err := resourceset.Alloc[int64](dev, 4)
		if err != nil {
			return err
		}
		defer buf.Free()
		r := int64(rt.Rank())
		if err := buf.CopyFrom(ctx, []int64{r, r, r, 10 * r}); err != nil {
			return err
		}
		if err := runtimeview.AllReduceDevice(ctx, rt, buf, comm.Sum); err != nil {
			return err
		}
		out := make([]int64, 4)
		if err := buf.CopyTo(ctx, out); err != nil {
			return err
		}
		if rt.Rank() == 0 {
			fmt.Println(dev.Name(), "of", len(rt.ResourceSet(2).Devices()), "on rank 2:", out)
		}
		return nil
	}, runtimeview.WithSimDevices(accel.SimConfig{Memory: 1 << 20}), runtimeview.WithHardwareOptions(hardware.WithoutGPUs()))
	if err != nil {
		fmt.Println(err)
	}
	// Output: sim0 of 1 on rank 2: [3 3 3 30]
}

// Master/worker: rank 0 submits every task; rank 1's worker runs its
// share of them. Each rank offers one worker here (the default is its
// share of the cores).
func ExampleRuntimeView_RunMaster() {
	square := &scheduler.Codelet{Name: "square", CPU: func(c *scheduler.Call) error {
		x := scheduler.VectorOf[float64](c, 0)
		for i := range x {
			x[i] *= x[i]
		}
		return nil
	}}
	err := runtimeview.RunLocal(context.Background(), 2, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		reg, err := dist.NewRegistry(square) // the same codelets on every rank
		if err != nil {
			return err
		}
		return rt.RunMaster(ctx, 0, reg, func(ctx context.Context, m *dist.Master) error {
			// A context of rank 1's workers keeps the tasks there (without
			// it, the policy spreads them over every rank's cores).
			var remote []int
			for w := range m.Workers() {
				if m.RankOf(w) == 1 {
					remote = append(remote, w)
				}
			}
			on1, err := m.Local().NewContext("rank 1", scheduler.ContextWorkers(remote...))
			if err != nil {
				return err
			}
			data := [][]float64{{1, 2}, {3, 4}, {5, 6}, {7, 8}}
			var hs []*scheduler.Handle
			for _, v := range data {
				h, err := m.Local().RegisterVector(v)
				if err != nil {
					return err
				}
				if err := m.Submit(ctx, square, scheduler.RW(h), scheduler.InContext(on1)); err != nil {
					return err
				}
				hs = append(hs, h)
			}
			if err := m.WaitAll(ctx); err != nil {
				return err
			}
			for _, h := range hs {
				if _, err := h.Unregister(ctx); err != nil {
					return err
				}
			}
			ran := int64(0)
			for _, st := range m.Local().Stats() {
				if m.RankOf(st.Worker) == 1 {
					ran += st.Tasks
				}
			}
			fmt.Println("workers:", m.Workers(), "tasks run by rank 1:", ran, "squares:", data)
			return nil
		}, scheduler.WithWorkers(1))
	}, runtimeview.WithHardwareOptions(hardware.WithoutGPUs()))
	if err != nil {
		fmt.Println(err)
	}
	// Output: workers: 2 tasks run by rank 1: 4 squares: [[1 4] [9 16] [25 36] [49 64]]
}
