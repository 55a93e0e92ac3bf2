package commtest_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/commtest"
	"github.com/pzgo/pz/comm/local"
)

// Outside a test, the cases can be run directly; here on three in-process
// ranks. In a test, call commtest.RunGroup or commtest.RunWorld instead.
func Example() {
	ctx := context.Background()
	ran, failed := 0, 0
	families := map[string]bool{} // AllReduce, Bcast, ...: what the cases cover
	for _, cs := range commtest.Cases() {
		ran++
		families[strings.Split(cs.Name, "/")[0]] = true
		if err := local.Run(ctx, 3, cs.Run); err != nil {
			fmt.Println(cs.Name, err)
			failed++
		}
	}
	fmt.Println("at least 100 cases:", ran >= 100, "covering AllReduce, P2P and Cancel:", families["AllReduce"] && families["P2P"] && families["Cancel"])
	fmt.Println("failed:", failed)
	// Output:
	// at least 100 cases: true covering AllReduce, P2P and Cancel: true
	// failed: 0
}

// Every case returns an error when the backend misbehaves. This one
// passes on a correct communicator and fails on one that wraps it and
// corrupts what AllReduce returns.
func ExampleCase() {
	var ar commtest.Case
	for _, cs := range commtest.Cases() {
		if cs.Name == "AllReduce/int32" {
			ar = cs
		}
	}
	ctx := context.Background()
	fmt.Println("correct backend:", local.Run(ctx, 2, ar.Run))
	err := local.Run(ctx, 2, func(ctx context.Context, c comm.Comm) error {
		return ar.Run(ctx, offByOne{c})
	})
	fmt.Println("broken backend caught:", err != nil)
	// Output:
	// correct backend: <nil>
	// broken backend caught: true
}

// offByOne is a broken backend: AllReduce adds 1 to the first byte.
type offByOne struct{ comm.Comm }

func (o offByOne) AllReduce(ctx context.Context, send, recv comm.Buf, op comm.Op) error {
	err := o.Comm.AllReduce(ctx, send, recv, op)
	if len(recv.Bytes) > 0 {
		recv.Bytes[0]++
	}
	return err
}
