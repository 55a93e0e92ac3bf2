package static

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSaturatingArithmetic: the master's sums and products stop at the
// int64 limits instead of wrapping around.
func TestSaturatingArithmetic(t *testing.T) {
	for _, tc := range []struct {
		name       string
		a, b, want int64
		mul        bool
	}{
		{"add", 2, 3, 5, false},
		{"add past the top", math.MaxInt64 - 1, 2, math.MaxInt64, false},
		{"add past the bottom", math.MinInt64 + 1, -2, math.MinInt64, false},
		{"add negative", 10, -3, 7, false},
		{"mul", 6, 7, 42, true},
		{"mul by 0", 0, math.MaxInt64, 0, true},
		{"mul past the top", 2, int64(2562047 * time.Hour), math.MaxInt64, true},
		{"mul at the top", 1, math.MaxInt64, math.MaxInt64, true},
	} {
		got := satAdd(tc.a, tc.b)
		if tc.mul {
			got = satMul(tc.a, tc.b)
		}
		assert.Equal(t, tc.want, got, tc.name)
	}
}

// TestMasterTimesSaturate: a start delay near the longest duration made
// t0 wrap around to the past, and the master aborted at once, saying a
// runnable was hours behind its plan; a plan file with a period longer
// than MaxPeriod (compiled before the verifier refused it) is refused.
func TestMasterTimesSaturate(t *testing.T) {
	spec, err := Parse([]byte(`hyperepochs:
  - {name: h, period: 24h, resources: [cpu0], epochs: [{name: f}]}
  - {name: k, period: 1ms, resources: [cpu1], epochs: [{name: g}]}
clients: [a]
runnables:
  - {name: x, client: a, resource: cpu0, epoch: f, wcet: 1ms}
  - {name: y, client: a, resource: cpu1, epoch: g, wcet: 100us}
`), "s.yaml")
	require.NoError(t, err)
	plan, err := Compile(spec)
	require.NoError(t, err, "a period of MaxPeriod compiles")

	m, err := NewMaster(plan, WithStartDelay(time.Duration(math.MaxInt64)), WithLiveness(time.Duration(math.MaxInt64-1)))
	require.NoError(t, err)
	assert.Equal(t, time.Duration(math.MaxInt64-1), m.opts.liveness)
	m.joined["a"] = &member{name: "a", out: newOutbox()}
	m.start(func() (*board, string, error) { return newBoard(len(plan.Runnables()), len(plan.Clients)), "", nil })
	assert.Zero(t, m.t0, "no t0 before the client is ready")
	m.clientReady("a")
	assert.Equal(t, int64(math.MaxInt64), m.t0, "t0 saturates")
	m.opts.liveness = time.Second
	assert.Empty(t, m.behind(plan.Runnables()), "nothing is behind a plan that starts at the end of time")

	long := *plan
	long.Hyperepochs = append([]PlanHyperepoch(nil), plan.Hyperepochs...)
	long.Hyperepochs[0].Period = 2562047 * time.Hour
	_, err = NewMaster(&long)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `hyperepoch "h" of the plan has a period of 2562047h0m0s, longer than the longest a run can keep time over, 24h (MaxPeriod); shorten it and compile the schedule again`)
}

// TestLostClientInRecord: a client whose records never came (a dead
// process) has its runnables in the record all the same, in plan order,
// marked lost, and the analysis shows them as lost, with no figures, and
// names the client; they were left out of both.
func TestLostClientInRecord(t *testing.T) {
	plan := compileString(t, threeClients)
	m, err := NewMaster(plan)
	require.NoError(t, err)
	row := func(name, client string) RunnableRun {
		return RunnableRun{Name: name, Client: client, Resource: "cpu0", WCET: 400e3,
			Seq: []int64{0}, Planned: []int64{0}, Deadline: []int64{1e6}, Start: []int64{10e3}, End: []int64{300e3}, Flags: []int{FlagTimeout},
			AllocObjects: []uint64{0}, AllocBytes: []uint64{0}}
	}
	m.results["a"] = &clientResult{Runnables: []RunnableRun{row("a2", "a"), row("a1", "a")}}
	m.results["c"] = &clientResult{Runnables: []RunnableRun{row("c1", "c")}}
	m.abortW = "client b (pid 1) disconnected mid-run"
	run, err := m.collect(plan.Runnables())
	require.ErrorIs(t, err, ErrAborted)

	var names []string
	for _, rr := range run.Runnables {
		names = append(names, rr.Name)
		assert.Equal(t, rr.Name == "b1", rr.Lost, rr.Name)
		require.NoError(t, rr.checkColumns())
	}
	assert.Equal(t, []string{"a1", "c1", "b1", "a2"}, names, "plan order")
	for _, c := range run.Clients {
		assert.Equal(t, c.Name == "b", c.Lost, c.Name)
	}
	var js strings.Builder
	require.NoError(t, WriteRun(&js, run))
	back, err := ReadRun(strings.NewReader(js.String()))
	require.NoError(t, err, "the record reads back")
	assert.True(t, back.Runnables[2].Lost)
	assert.Contains(t, js.String(), `"lost":true`)

	a := Analyze(back)
	assert.Equal(t, []string{"b"}, a.LostClients)
	require.Len(t, a.Runnables, 4)
	assert.True(t, a.Runnables[2].Lost)
	assert.Equal(t, 3, a.Timeouts)
	var text strings.Builder
	require.NoError(t, a.WriteText(&text))
	out := text.String()
	assert.Regexp(t, `(?m)^ +b1 +b +cpu1 +lost +- +- +- +- +- +- +- +400.0µs +- +- +- *$`, out)
	assert.Contains(t, out, "overruns: 0; skipped frames: 0; timeouts: 3\n")
	assert.Contains(t, out, "the records of client b were lost (its process died or stopped answering before it sent them): b1 show no figures, and the figures above leave them out\n")
	assert.Contains(t, out, "a1 ran past its timeout 1 time (its context was canceled)\n")
}

// The master's progress line counts one hyperepoch's periods as before,
// and names each hyperepoch's count when there are several (they count
// apart: the summary's periods are the most of any), none past a frame
// limit.
func TestProgressLineNamesEachHyperepoch(t *testing.T) {
	ms := time.Millisecond
	one := []PlanHyperepoch{{Name: "main", Period: 10 * ms}}
	assert.Equal(t, "period 99 of 1000", progressLine(one, int64(995*ms), 1000))
	assert.Equal(t, "period 99", progressLine(one, int64(995*ms), 0))
	two := []PlanHyperepoch{{Name: "fast", Period: 10 * ms}, {Name: "slow", Period: 30 * ms}}
	assert.Equal(t, "periods: fast 299, slow 99", progressLine(two, int64(2995*ms), 0))
	assert.Equal(t, "periods: fast 100, slow 99, of 100 each", progressLine(two, int64(2995*ms), 100))
}
