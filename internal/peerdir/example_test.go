package peerdir_test

import (
	"fmt"

	"github.com/pzgo/pz/internal/peerdir"
)

// Find returns "" for a peer that does not exist, so callers skip it.
func ExampleFind() {
	fmt.Printf("%q\n", peerdir.Find("no-such-peer"))
	// Output: ""
}
