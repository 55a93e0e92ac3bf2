package runtimeview

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/logger"
)

// In-process ranks share GOMAXPROCS without leaving a P idle or sharing
// one, and each gets at least one worker.
func TestLocalShare(t *testing.T) {
	for _, tc := range []struct{ procs, n int }{{16, 3}, {16, 16}, {2, 3}, {7, 2}, {1, 1}, {64, 5}} {
		total := 0
		for r := range tc.n {
			s := localShare(tc.procs, tc.n, r)
			if s < 1 {
				t.Errorf("procs %d, %d ranks: rank %d gets %d", tc.procs, tc.n, r, s)
			}
			if lo, hi := tc.procs/tc.n, tc.procs/tc.n+1; s < max(lo, 1) || s > max(hi, 1) {
				t.Errorf("procs %d, %d ranks: rank %d gets %d, outside [%d, %d]", tc.procs, tc.n, r, s, lo, hi)
			}
			total += s
		}
		if want := max(tc.procs, tc.n); total != want {
			t.Errorf("procs %d, %d ranks: %d workers in all, want %d", tc.procs, tc.n, total, want)
		}
	}
}

// The rank's scheduler logs its Info lines (context resizes) on the root
// rank only and its warnings on every rank: N ranks do not print N
// copies of a program's resizes, and a rank's own trouble is not hidden.
func TestSchedulerLoggerBands(t *testing.T) {
	var mu sync.Mutex
	var out strings.Builder
	w := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return out.Write(p)
	})
	err := RunLocal(context.Background(), 3, func(ctx context.Context, rt *RuntimeView) error {
		l := rt.schedulerLogger()
		l.Info("an info line")
		l.Warn("a warning")
		l.Debug("a debug line")
		return nil
	}, WithLogOptions(logger.WithEnv(nil), logger.WithWriter(w)), WithHardwareOptions(hardware.WithoutGPUs()))
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	text := out.String()
	if n := strings.Count(text, "an info line"); n != 1 || !strings.Contains(text, "rank 0\tan info line") {
		t.Errorf("the info line %d times, want once from rank 0:\n%s", n, text)
	}
	for r := range 3 {
		if !strings.Contains(text, fmt.Sprintf("rank %d\ta warning", r)) {
			t.Errorf("no warning from rank %d:\n%s", r, text)
		}
	}
	if strings.Contains(text, "a debug line") {
		t.Errorf("a debug line at the default level:\n%s", text)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
