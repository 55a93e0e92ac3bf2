package dist_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/scheduler"
	"github.com/pzgo/pz/scheduler/dist"
)

// The master's trace and Gantt chart name every worker after its rank and
// its core there ("rank 2 cpu1"), not cpu0..cpuN, which left a reader to
// call RankOf; WorkerName agrees with RankOf.
func TestMasterTraceNamesRanks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cores := []int{2, 1, 2} // each rank's workers
	var trace, chart bytes.Buffer
	var names []string
	err := local.Run(ctx, len(cores), func(ctx context.Context, c comm.Comm) error {
		reg, err := dist.NewRegistry(mwApply)
		if err != nil {
			return err
		}
		opts := []scheduler.Option{scheduler.WithWorkers(cores[c.Rank()]), scheduler.WithStats(true)}
		return dist.RunMaster(ctx, c, 0, reg, opts, func(ctx context.Context, m *dist.Master) error {
			h, err := m.Local().RegisterVector(make([]int64, 4))
			if err != nil {
				return err
			}
			for w := range m.Workers() {
				// One task on each worker, so that each has a row.
				ctxw, err := m.Local().NewContext(fmt.Sprintf("w%d", w), scheduler.ContextWorkers(w))
				if err != nil {
					return err
				}
				if err := m.Submit(ctx, mwApply, scheduler.RW(h), scheduler.WithArg([]int64{int64(scheduler.ModeRW), 1}), scheduler.InContext(ctxw)); err != nil {
					return err
				}
			}
			if err := m.WaitAll(ctx); err != nil {
				return err
			}
			for w := range m.Workers() {
				n := m.Local().WorkerName(w)
				names = append(names, n)
				assert.Regexp(t, fmt.Sprintf(`^rank %d cpu\d+$`, m.RankOf(w)), n, "worker %d", w)
			}
			if err := m.Local().WriteTrace(&trace); err != nil {
				return err
			}
			return m.Local().WriteGantt(&chart)
		})
	})
	require.NoError(t, err)
	want := []string{"rank 0 cpu0", "rank 0 cpu1", "rank 1 cpu0", "rank 2 cpu0", "rank 2 cpu1"}
	assert.Equal(t, want, names)
	var tr struct {
		TraceEvents []struct {
			Ph   string         `json:"ph"`
			Name string         `json:"name"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(trace.Bytes(), &tr))
	var threads []string
	for _, e := range tr.TraceEvents {
		if e.Ph == "M" && e.Name == "thread_name" {
			if n, ok := e.Args["name"].(string); ok {
				threads = append(threads, n)
			}
		}
	}
	for _, n := range want {
		assert.Contains(t, threads, n, "the trace's threads")
		assert.Contains(t, chart.String(), ">"+n+"<", "the chart's rows")
	}
}
