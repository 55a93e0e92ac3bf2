package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOutputFileRefusedUpFront: an output file that could not be
// written after the run (-trace, -svg, -o in a missing directory, in a
// file, a directory itself, a trace named .svg) is a usage error, before
// any rank starts: status 2, the flag and the fix named, no "rank 0:"
// (it was status 1 from rank 0, and several ranks found a missing
// directory only after the whole run).
func TestOutputFileRefusedUpFront(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-dir", "x.json")
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	src := writeSchedule(t, pipelineYAML)
	small := map[string][]string{
		"cholesky": {"-n", "256", "-b", "64"},
		"gemm":     {"-n", "256", "-b", "64"},
		"contexts": {"-small", "128", "-large", "256", "-b", "64", "-workers", "2"},
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "2", "cholesky", "-trace", missing}, "pzrun cholesky: -trace " + missing + ": its directory " + filepath.Dir(missing) + " does not exist: create it first (mkdir -p " + filepath.Dir(missing) + ")"},
		{[]string{"cholesky", "-trace", missing}, "-trace " + missing + ": its directory"},
		{[]string{"-n", "2", "gemm", "-trace", missing}, "pzrun gemm: -trace " + missing + ": its directory"},
		{[]string{"gemm", "-trace", missing}, "-trace " + missing + ": its directory"},
		{[]string{"contexts", "-trace", missing}, "pzrun contexts: -trace " + missing + ": its directory"},
		{[]string{"cholesky", "-trace", filepath.Join(file, "x.json")}, file + " is not a directory"},
		{[]string{"cholesky", "-trace", dir}, "-trace " + dir + " is a directory: name a file in it"},
		{[]string{"-n", "2", "cholesky", "-trace", filepath.Join(dir, "t.svg")}, "its Gantt chart is written beside it as t.svg: name the trace " + filepath.Join(dir, "t.json")},
		{[]string{"stm", "compile", src, "-svg", missing}, "pzrun stm compile: -svg " + missing + ": its directory"},
		{[]string{"stm", "compile", src, "-o", missing}, "pzrun stm compile: -o " + missing + ": its directory"},
		{[]string{"stm", "analyze", file, "-svg", missing}, "pzrun stm analyze: -svg " + missing + ": its directory"},
		{[]string{"stm", "analyze", file, "-trace", missing}, "pzrun stm analyze: -trace " + missing + ": its directory"},
		{[]string{"stm", "bench", "-frames", "1", "-o", missing}, "pzrun stm bench: -o " + missing + ": its directory"},
	} {
		args := c.args
		for i, a := range args {
			if extra, ok := small[a]; ok {
				args = append(append(append([]string{}, args[:i+1]...), extra...), args[i+1:]...)
				break
			}
		}
		code, out, errs := pzrun(t, args...)
		assert.Equal(t, 2, code, "%q: %s", args, errs)
		assert.Contains(t, errs, c.want, args)
		assert.NotContains(t, errs, "rank 0", args)
		assert.Empty(t, out, args)
		assert.Equal(t, 1, strings.Count(errs, "\n"), "one line: %q: %s", args, errs)
	}
	// stm compile wrote its plan before it found -svg unwritable.
	assert.NoFileExists(t, strings.TrimSuffix(src, filepath.Ext(src))+".stm")
}
