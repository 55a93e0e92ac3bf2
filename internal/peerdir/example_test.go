package peerdir_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/pzgo/pz/internal/peerdir"
)

// Find returns "" for a peer that does not exist, so callers skip it.
func ExampleFind() {
	fmt.Printf("%q\n", peerdir.Find("no-such-peer"))
	// Output: ""
}

// From finds shared/peers/NAME beside the module that holds dir, from any
// folder inside it; here a checkout laid out in a temporary folder.
func ExampleFrom() {
	root, err := os.MkdirTemp("", "peerdir")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(root)
	checkout := filepath.Join(root, "main")
	deep := filepath.Join(checkout, "cmd", "tool")
	peer := filepath.Join(root, "shared", "peers", "mpi")
	for _, d := range []string{deep, peer} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			fmt.Println(err)
			return
		}
	}
	if err := os.WriteFile(filepath.Join(checkout, "go.mod"), []byte("module example.com/m\n"), 0o644); err != nil {
		fmt.Println(err)
		return
	}
	got := peerdir.From(deep, "mpi")
	fmt.Println(got == peer, peerdir.From(deep, "starpu") == "")
	// Output: true true
}
