package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/pzgo/pz/runtimeview"
)

// asMain, set in a test binary's environment, makes it run main instead
// of the tests: TestArgs starts the program so.
const asMain = "PZ_EXAMPLE_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

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
	for _, c := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"extra", "args"}, "cuda: arguments not understood: extra args (it takes none; PZ_RANKS=N sets the in-process ranks)\n"},
		{[]string{"-nosuchflag"}, "flag provided but not defined: -nosuchflag"},
	} {
		cmd := exec.CommandContext(t.Context(), os.Args[0], c.args...)
		cmd.Env = append(os.Environ(), asMain+"=1")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("%q: %v, want exit status 2; stderr %q", c.args, err, stderr.String())
		}
		if !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: stderr %q, want it to contain %q", c.args, stderr.String(), c.want)
		}
		if stdout.Len() > 0 {
			t.Errorf("%q: printed %q, want nothing (it did not run)", c.args, stdout.String())
		}
	}
}
