package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pzgo/pz/examples/internal/clitest"

	"github.com/pzgo/pz/runtimeview"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

// TestRanks runs the example on 1 to 4 in-process ranks; run checks π
// on every rank.
func TestRanks(t *testing.T) {
	for _, ranks := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprint(ranks), func(t *testing.T) {
			err := runtimeview.RunLocal(t.Context(), ranks, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
				return run(ctx, rt, terms, io.Discard)
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestOneWorker runs one rank with one worker: its line said "1 workers".
func TestOneWorker(t *testing.T) {
	t.Setenv("PZ_NCPU", "1")
	var out strings.Builder // one rank writes
	err := runtimeview.RunLocal(t.Context(), 1, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		return run(ctx, rt, 3*chunk, &out)
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "rank 0: 3 tasks, 1 worker, 3 run by the submitting goroutine\n"; out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
	if got, want := count(1, "rank"), "1 rank"; got != want { // the log line's "over 1 ranks"
		t.Errorf("count(1, rank) = %q, want %q", got, want)
	}
}

// TestTermsNotAMultipleOfChunk checks that the last task stops at n.
func TestTermsNotAMultipleOfChunk(t *testing.T) {
	err := runtimeview.RunLocal(t.Context(), 2, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		return run(ctx, rt, 3*chunk+17, io.Discard)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestInterrupted cancels the ranks' context in the middle of a run that
// would take many minutes: run must return, and Close end. With one
// worker per rank (the driven one), a run that returned without Deinit
// left its queued tasks to nobody, and rt.Close waited for them forever
// (a Ctrl-C of PZ_RANKS=2 leibniz on 2 cores hung).
func TestInterrupted(t *testing.T) {
	t.Setenv("PZ_NCPU", "1")
	for _, ranks := range []int{1, 2} {
		t.Run(fmt.Sprint(ranks), func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			started := make(chan struct{}, ranks) // a token per rank once one of its tasks has run
			done := make(chan error, 1)
			go func() {
				done <- runtimeview.RunLocal(ctx, ranks, func(ctx context.Context, rt *runtimeview.RuntimeView) error {
					var once sync.Once
					return runHooked(ctx, rt, 1<<42, io.Discard, func() {
						once.Do(func() { started <- struct{}{} })
					})
				})
			}()
			// Into the submissions on every rank (the whole run takes
			// hours): each has run a task.
			for range ranks {
				select {
				case <-started:
				case err := <-done:
					t.Fatalf("run ended before it was canceled: %v", err)
				case <-time.After(time.Minute):
					t.Fatal("no task ran on some rank within a minute")
				}
			}
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("run after cancel: %v, want context.Canceled", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("run or Close did not return within a minute of the cancel")
			}
		})
	}
}

// TestArgs: the program takes no arguments; it ran with any, ignoring
// them. Now they are a usage error: status 2, naming them.
func TestArgs(t *testing.T) {
	clitest.Args(t, []clitest.Case{
		{Args: []string{"extra", "args"}, Want: "leibniz: arguments not understood: extra args (it takes none; PZ_RANKS=N sets the in-process ranks)\n"},
		{Args: []string{"-nosuchflag"}, Want: "flag provided but not defined: -nosuchflag"},
	}...)
}
