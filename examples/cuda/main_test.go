package main

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/pzgo/pz/examples/internal/clitest"

	"github.com/pzgo/pz/runtimeview"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

// syncWriter lets the ranks print on one buffer.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// TestNoGPU runs the example on 2 ranks without GPUs (no WithCUDA): the
// tasks run on the CPUs, and the skipped collective is said, where it
// ended without a word.
func TestNoGPU(t *testing.T) {
	var out syncWriter
	err := runtimeview.RunLocal(t.Context(), 2, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		return run(ctx, rt, &out)
	})
	if err != nil {
		t.Fatal(err)
	}
	got := out.b.String()
	for _, want := range []string{
		"rank 0 (no GPU): 32 tasks, 0 on GPUs, x right\n",
		"rank 1 (no GPU): 32 tasks, 0 on GPUs, x right\n",
		"AllReduceDevice skipped: no GPU on rank 0, 1\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("printed %q, want a line %q", got, want)
		}
	}
}

// TestArgs: the program takes no arguments; it ran with any, ignoring
// them. Now they are a usage error: status 2, naming them.
func TestArgs(t *testing.T) {
	clitest.Args(t, []clitest.Case{
		{Args: []string{"extra", "args"}, Want: "cuda: arguments not understood: extra args (it takes none; PZ_RANKS=N sets the in-process ranks)\n"},
		{Args: []string{"-nosuchflag"}, Want: "flag provided but not defined: -nosuchflag"},
	}...)
}
