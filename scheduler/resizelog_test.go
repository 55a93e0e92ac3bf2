package scheduler_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/pzgo/pz/scheduler"
)

// TestResizeLogLevels: the program's own context changes (NewContext,
// MoveWorkers) are logged at Debug, a monitor's (the hypervisor's) at
// Info: every program that made a context printed an Info line per
// worker it gave it.
func TestResizeLogLevels(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	s := newSched(t, scheduler.WithWorkers(2), scheduler.WithLogger(zap.New(core)))
	a, err := s.NewContext("a", scheduler.ContextWorkers(0))
	require.NoError(t, err)
	b, err := s.NewContext("b", scheduler.ContextWorkers(1))
	require.NoError(t, err)
	waitResize(t, s, 0, "add")
	require.NoError(t, s.MoveWorkers(a, b, 0))
	waitResize(t, s, 0, "move")
	require.NoError(t, s.MoveWorkersFor("hypervisor test", b, a, 0))
	want := map[string]zapcore.Level{"add": zapcore.DebugLevel, "move": zapcore.DebugLevel, "hypervisor test": zapcore.InfoLevel}
	levels := map[string]zapcore.Level{}
	// The line is written as the worker applies the change: wait for it.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && len(levels) < len(want); time.Sleep(time.Millisecond) {
		for _, e := range logs.FilterMessage("context resize").All() {
			levels[e.ContextMap()["reason"].(string)] = e.Level
		}
	}
	require.Equal(t, want, levels)
}
