package dist_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// With PZ_TRACE set, the trace file is the master's: every rank's cores
// as its workers (the master's own, then a proxy per worker rank's core),
// not the trace of a worker rank's scheduler, which closed last and wrote
// its one worker over the master's file (in-process ranks share the path;
// under MPI so do processes on one file system).
func TestMasterTraceIsTheMasters(t *testing.T) {
	file := filepath.Join(t.TempDir(), "mw.json")
	t.Setenv("PZ_TRACE", file)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	err := local.Run(ctx, 3, func(ctx context.Context, c comm.Comm) error {
		reg, err := dist.NewRegistry(mwApply)
		if err != nil {
			return err
		}
		return dist.RunMaster(ctx, c, 0, reg, []scheduler.Option{scheduler.WithWorkers(1)}, func(ctx context.Context, m *dist.Master) error {
			h, err := m.Local().RegisterVector(make([]int64, 4))
			if err != nil {
				return err
			}
			if err := m.Submit(ctx, mwApply, scheduler.RW(h), scheduler.WithArg([]int64{int64(scheduler.ModeRW), 1})); err != nil {
				return err
			}
			return m.WaitAll(ctx)
		})
	})
	require.NoError(t, err)
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	var trace struct {
		TraceEvents []struct {
			Ph   string         `json:"ph"`
			Name string         `json:"name"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(raw, &trace))
	var threads []any
	for _, e := range trace.TraceEvents {
		if e.Ph == "M" && e.Name == "thread_name" {
			threads = append(threads, e.Args["name"])
		}
	}
	require.Len(t, threads, 3, "the master's trace has a worker per rank's core: %v", threads)
}
