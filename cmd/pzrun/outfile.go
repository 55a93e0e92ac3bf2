package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// checkOutFile refuses, as a usage error naming the flag, an output
// file that could not be written once the run is done: its directory
// missing or not a directory, or path itself a directory. It is checked
// before anything runs (env.validate), like the other flags, not found
// when the file is written at the end of the run. "" is no file.
func checkOutFile(flag, path string) error {
	if path == "" {
		return nil
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case os.IsNotExist(err):
		return fmt.Errorf("%w: %s %s: its directory %s does not exist: create it first (mkdir -p %s) or name a file in an existing directory", errUsage, flag, path, dir, dir)
	case err != nil:
		return fmt.Errorf("%w: %s %s: its directory %s: %v: name a file in an existing directory", errUsage, flag, path, dir, err)
	case !st.IsDir():
		return fmt.Errorf("%w: %s %s: %s is not a directory: name a file in an existing directory", errUsage, flag, path, dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%w: %s %s is a directory: name a file in it", errUsage, flag, path)
	}
	return nil
}

// checkTraceFile is checkOutFile for a Chrome trace whose Gantt chart
// is written beside it with the extension .svg (scheduler.WithTrace):
// the trace itself must not end in .svg.
func checkTraceFile(flag, path string) error {
	if strings.EqualFold(filepath.Ext(path), ".svg") {
		json := strings.TrimSuffix(path, filepath.Ext(path)) + ".json"
		return fmt.Errorf("%w: %s %s: the trace is JSON and its Gantt chart is written beside it as %s: name the trace %s", errUsage, flag, path, filepath.Base(path), json)
	}
	return checkOutFile(flag, path)
}
