// Package peerdir finds the team's peer benchmarks (../shared/peers/NAME
// beside the checkout), which pz's benchmarks run in the same invocation
// to report ratios against C MPI and StarPU.
package peerdir

import (
	"os"
	"path/filepath"
)

// Find returns the folder ../shared/peers/name beside the module root (the
// nearest folder holding go.mod, searched upward from the working
// directory), or "" when there is no such folder.
func Find(name string) string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "..", "shared", "peers", name)
			if st, err := os.Stat(p); err == nil && st.IsDir() {
				return p
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
