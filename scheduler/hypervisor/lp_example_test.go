package hypervisor_test

import (
	"fmt"

	"github.com/pzgo/pz/scheduler/hypervisor"
)

// feft's linear program on two contexts: 2e10 flops left in "small",
// 6e10 in "large", 8 CPU workers that run both at 1 Gflop/s and one GPU
// that runs small's tasks at 10 Gflop/s and large's at 20. The GPU goes
// to large, where it is fastest; the CPUs are shared so that both end
// together.
func ExampleSolveFlops() {
	d, err := hypervisor.SolveFlops(hypervisor.FlopsProblem{
		Flops:   []float64{2e10, 6e10},
		Speed:   [][]float64{{1e9, 10e9}, {1e9, 20e9}}, // [context][cpu, gpu]
		Workers: []int{8, 1},
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("end in %.2f s\n", d.End)
	for i, name := range []string{"small", "large"} {
		fmt.Printf("%s: %.2f CPUs, %.2f GPUs -> %d CPUs, %d GPUs\n", name, d.Share[i][0], d.Share[i][1], d.Workers[i][0], d.Workers[i][1])
	}
	// Output:
	// end in 2.86 s
	// small: 7.00 CPUs, 0.00 GPUs -> 7 CPUs, 0 GPUs
	// large: 1.00 CPUs, 1.00 GPUs -> 1 CPUs, 1 GPUs
}
