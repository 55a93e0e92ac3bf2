package static_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler/static"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// frame is one recorded run: start and end in µs from its period's
// start, and its flags.
type frame struct {
	start, end int64
	flags      int
}

// lateRun is a recorded run of three periods of 10 ms of a pipeline:
// grab (camera, cpu0) -> fuse (camera, cpu1) -> plan (planner, cpu0),
// and tag after grab on cpu0, depending on nothing. In period 1 grab
// runs 3 ms of its 1 ms WCET, so that tag (its thread busy), fuse, then
// plan start late; in period 2 plan's thread starts it late on its own (a
// loaded machine), with grab and fuse on time.
func lateRun() *static.Run {
	const period = int64(10 * time.Millisecond)
	us := int64(time.Microsecond)
	type spec struct {
		name, client, resource string
		deps                   []string
		planned, wcet, slack   int64 // µs into the period
		frames                 []frame
	}
	specs := []spec{
		{"grab", "camera", "cpu0", nil, 0, 1000, 0, []frame{{5, 900, 0}, {5, 3000, static.FlagOverrunWCET | static.FlagOverrunDeadline}, {5, 950, 0}}},
		{"tag", "camera", "cpu0", nil, 1200, 300, 0, []frame{{1205, 1450, 0}, {3005, 3300, static.FlagOverrunDeadline}, {1205, 1400, 0}}},
		{"fuse", "camera", "cpu1", []string{"grab"}, 1000, 1000, 500, []frame{{1000, 1800, 0}, {3010, 3900, static.FlagOverrunDeadline}, {1000, 1900, 0}}},
		{"plan", "planner", "cpu0", []string{"fuse"}, 2500, 2000, 500, []frame{{2505, 4000, 0}, {3910, 5500, static.FlagOverrunDeadline}, {4800, 6000, static.FlagOverrunDeadline}}},
	}
	r := &static.Run{Format: "pz-stm-run", Version: static.RunVersion, Plan: "0123456789abcdef", Source: "late.yaml", Periods: 3,
		Stopped: "frame limit (3 periods)", Hyperepochs: []static.RunHyperepoch{{Name: "main", Period: period, Periods: 3}}}
	for _, c := range []string{"camera", "planner"} {
		r.Clients = append(r.Clients, static.ClientRun{Name: c, PID: 100, PeriodsOf: "main"})
	}
	for _, s := range specs {
		rr := static.RunnableRun{Name: s.name, Client: s.client, Resource: s.resource, WCET: s.wcet * us, Deps: s.deps}
		for k, f := range s.frames {
			p := int64(k)*period + s.planned*us
			rr.Seq = append(rr.Seq, int64(k))
			rr.Planned = append(rr.Planned, p)
			rr.Deadline = append(rr.Deadline, p+(s.wcet+s.slack)*us)
			rr.Start = append(rr.Start, int64(k)*period+f.start*us)
			rr.End = append(rr.End, int64(k)*period+f.end*us)
			rr.Flags = append(rr.Flags, f.flags)
			rr.AllocObjects = append(rr.AllocObjects, 0)
			rr.AllocBytes = append(rr.AllocBytes, 0)
		}
		r.Runnables = append(r.Runnables, rr)
	}
	return r
}

// golden compares got with testdata/NAME, or writes it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := "testdata/" + name
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
}

// The text analysis keeps apart a runnable that ran long (grab, past its
// WCET) from those that started late because of it (tag waited for grab
// on their core, fuse for grab, its dependency; plan for fuse, whose
// root cause is grab), and from a start that
// its own thread made late (plan in period 2): per runnable and by root
// cause. The record goes through WriteRun and ReadRun first, as pzrun stm
// analyze reads it.
func TestAnalyzeBlamesLateStarts(t *testing.T) {
	var rec bytes.Buffer
	require.NoError(t, static.WriteRun(&rec, lateRun()))
	run, err := static.ReadRun(&rec)
	require.NoError(t, err)
	a := static.Analyze(run)
	var text bytes.Buffer
	require.NoError(t, a.WriteText(&text))
	golden(t, "late.analysis.txt", text.Bytes())

	var js bytes.Buffer
	require.NoError(t, a.WriteJSON(&js))
	lines := strings.Split(strings.TrimSpace(js.String()), "\n")
	require.Len(t, lines, 5)
	var plan, sum map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[3]), &plan))
	require.NoError(t, json.Unmarshal([]byte(lines[4]), &sum))
	// The fields from before keep their meaning: plan overran its
	// deadline twice and its WCET never.
	assert.Equal(t, "plan", plan["name"])
	assert.EqualValues(t, 0, plan["overruns_wcet"])
	assert.EqualValues(t, 2, plan["overruns_deadline"])
	assert.EqualValues(t, 2, plan["started_late"])
	assert.Equal(t, []any{
		map[string]any{"waited_for": "fuse", "root": "grab", "root_cause": "ran_long", "frames": 1.0},
		map[string]any{"root": "plan", "root_cause": "late_thread", "frames": 1.0},
	}, plan["late_causes"])
	assert.EqualValues(t, 5, sum["overruns"])
	assert.EqualValues(t, 1, sum["overruns_wcet"])
	assert.EqualValues(t, 4, sum["started_late"])
	assert.Equal(t, []any{
		map[string]any{"root": "grab", "root_cause": "ran_long", "frames": 3.0},
		map[string]any{"root": "plan", "root_cause": "late_thread", "frames": 1.0},
	}, sum["late_roots"])
}

// A runnable that waited for its own run in the frame before (grab, alone
// on cpu0, ran 10.5 ms of its 1 ms WCET in frame 0, past the start of
// frame 1) is not said to wait for itself: the text said "grab 1 frame:
// waited for grab, which ran long". The JSON keeps the name.
func TestAnalyzeLateAfterItsOwnFrame(t *testing.T) {
	const period, us = int64(10 * time.Millisecond), int64(time.Microsecond)
	rr := static.RunnableRun{Name: "grab", Client: "camera", Resource: "cpu0", WCET: 1000 * us,
		Seq: []int64{0, 1}, Planned: []int64{0, period}, Deadline: []int64{1000 * us, period + 1000*us},
		Start: []int64{5 * us, period + 500*us}, End: []int64{period + 500*us, period + 1100*us},
		Flags:        []int{static.FlagOverrunWCET | static.FlagOverrunDeadline, static.FlagOverrunDeadline},
		AllocObjects: []uint64{0, 0}, AllocBytes: []uint64{0, 0}}
	r := &static.Run{Format: "pz-stm-run", Version: static.RunVersion, Plan: "0123456789abcdef", Source: "self.yaml", Periods: 2,
		Stopped: "frame limit (2 periods)", Hyperepochs: []static.RunHyperepoch{{Name: "main", Period: period, Periods: 2}},
		Clients: []static.ClientRun{{Name: "camera", PID: 100, PeriodsOf: "main"}}, Runnables: []static.RunnableRun{rr}}
	a := static.Analyze(r)
	require.Len(t, a.Runnables, 1)
	assert.Equal(t, []static.LateCause{{WaitedFor: "grab", Root: "grab", RootCause: static.CauseRanLong, Frames: 1}}, a.Runnables[0].LateCauses)
	var text bytes.Buffer
	require.NoError(t, a.WriteText(&text))
	assert.Contains(t, text.String(), "  grab 1 frame: waited for its own run in the frame before, which ran long\n")
	assert.NotContains(t, text.String(), "waited for grab")
}
