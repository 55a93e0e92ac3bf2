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
