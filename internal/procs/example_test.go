package procs_test

import (
	"fmt"

	"github.com/pzgo/pz/internal/procs"
)

func ExampleDecide() {
	// Four ranks on a 16-core node, no binding, no GOMAXPROCS set.
	d := procs.Decide(procs.Input{Current: 16, LocalRanks: 4, AllowedCPUs: 16, OnlineCPUs: 16})
	fmt.Println(d.Procs, d.Reason)
	// Output: 4 16 allowed CPUs shared by 4 local ranks
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
	// Output: GOMAXPROCS 16 -> 4: 16 allowed CPUs shared by 4 local ranks
}
