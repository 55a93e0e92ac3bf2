package procs_test

import (
	"fmt"

	"github.com/pzgo/pz/internal/procs"
)

func ExampleDecide() {
	// Four ranks on a 16-core node, no binding, no GOMAXPROCS set.
	d := procs.Decide(procs.Input{Current: 16, LocalRanks: 4, AllowedCPUs: 16, OnlineCPUs: 16})
	fmt.Println(d.Procs, d.Reason)
	// Output: 4 16 allowed CPUs shared by 4 local ranks (estimated)
}

// Apply is called once, early, by the code that owns the process. The
// report depends on the machine, so this example has no fixed output.
func ExampleApply() {
	localRanks := 4 // from the launcher's environment or an MPI shared-memory split
	rep := procs.Apply(localRanks)
	fmt.Println(rep)
}

func ExampleReport_String() {
	in := procs.Input{Current: 16, LocalRanks: 4, AllowedCPUs: 16, OnlineCPUs: 16}
	d := procs.Decide(in)
	rep := procs.Report{Input: in, Decision: d, Before: in.Current, After: d.Procs}
	fmt.Println(rep)
	// Output: GOMAXPROCS 16 -> 4: 16 allowed CPUs shared by 4 local ranks (estimated)
}

// Three ranks on an 8-core node: rank 0 bound to cores 0-3, ranks 1 and 2
// both to cores 4-7 (a binding an estimate from counts gets wrong).
func ExampleMaskShare() {
	var a, b procs.CPUMask
	a[0], b[0] = 0x0f, 0xf0
	all := []procs.CPUMask{a, b, b}
	for r, m := range all {
		share := procs.MaskShare(m, all)
		d := procs.Decide(procs.Input{Current: 8, LocalRanks: 3, AllowedCPUs: m.Count(), OnlineCPUs: 8, MaskShare: share})
		fmt.Printf("rank %d: %d\n", r, d.Procs)
	}
	// Output:
	// rank 0: 4
	// rank 1: 2
	// rank 2: 2
}
