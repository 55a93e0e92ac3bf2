package main

import (
	"fmt"
	"testing"

	"github.com/pzgo/pz/comm/commbench"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBenchCommSummary: bench comm's line in pzrun's usage says what it
// measures, every op -ops takes, not the three of its default (it said
// AllReduce/AllGather/Bcast).
func TestBenchCommSummary(t *testing.T) {
	a, ok := findApp("bench comm")
	require.True(t, ok)
	assert.Contains(t, a.summary, fmt.Sprintf("%d operations", len(commbench.Ops())))
	assert.Contains(t, a.summary, "-ops")
	code, out, _ := pzrun(t, "help", "bench")
	require.Equal(t, 0, code)
	assert.Contains(t, out, a.summary)
}

// TestBenchCommBlockingLocal: -blocking chooses the MPI backend's form of
// the collectives; with the in-process ranks of -backend local, which
// have one form, it is a usage error that says so (either value), before
// any rank runs. Without it the local lines carry no collective_form.
func TestBenchCommBlockingLocal(t *testing.T) {
	for _, args := range [][]string{
		{"-n", "2", "bench", "comm", "-blocking"},
		{"-n", "2", "bench", "comm", "-blocking=false"},
		{"bench", "comm", "-backend", "local", "-blocking=true"},
	} {
		code, out, errs := pzrun(t, append(args, "-ops", "allreduce", "-sizes", "8", "-scale", "0.01", "-peer=")...)
		assert.Equal(t, 2, code, "%q: %s", args, errs)
		assert.Empty(t, out, args)
		assert.Contains(t, errs, "-blocking chooses the MPI backend's form", args)
		assert.Contains(t, errs, "drop -blocking, or measure -backend mpi", args)
	}
	code, out, errs := pzrun(t, "-n", "2", "bench", "comm", "-ops", "allreduce", "-sizes", "8", "-scale", "0.01", "-peer=")
	require.Equal(t, 0, code, errs)
	recs := jsonLines(t, out)
	require.Len(t, recs, 1, out)
	assert.Equal(t, "local", recs[0]["backend"])
	assert.NotContains(t, recs[0], "collective_form", "the in-process backend has one form")
}
