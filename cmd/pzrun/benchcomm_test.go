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
