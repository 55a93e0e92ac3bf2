// Package peerdir finds the team's peer benchmarks (../shared/peers/NAME
// beside the checkout), which pz's benchmarks run in the same invocation
// to report ratios against C MPI and StarPU.
package peerdir

import (
	"os"
	"path/filepath"
	"runtime"
)

// Find returns the folder ../shared/peers/name beside the checkout, or ""
// when there is none: the checkout is the module above the working
// directory, else above the running binary, else above the source this
// package was built from (a binary built without -trimpath knows it), so
// that a program run from elsewhere finds the peers of the checkout it
// was built in.
func Find(name string) string {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		if d := From(dir, name); d != "" {
			return d
		}
	}
	return ""
}

// From returns ../shared/peers/name beside the nearest folder at or above
// dir that holds a go.mod, or "" when there is none or it has no such
// folder.
func From(dir, name string) string {
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
