package benchtasks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// A small run of every case and policy: every record is printed as one
// JSON line, values are sane, and peer figures are attached (with the
// ratio recomputed here) exactly for the policies StarPU has. The task
// counters inside Run fail it if a task is lost or runs twice.
func TestRunSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	peer := loadPeer(t)
	var out bytes.Buffer
	opts := Options{Workers: []int{2, 1}, Tasks: 2000, Rounds: 3, Grains: []int{1, 16}, GrainTasks: 50, Peer: peer,
		SchedulerOptions: []scheduler.Option{scheduler.WithPerfModelDir(t.TempDir())}}
	// Run in a goroutine so that a scheduler that loses tasks (WaitAll
	// returns at the deadline, then Close waits forever) fails the test
	// instead of hanging it.
	type result struct {
		recs []Record
		err  error
	}
	done := make(chan result, 1)
	go func() {
		recs, err := Run(ctx, opts, &out)
		done <- result{recs, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("benchtasks.Run did not return: the scheduler lost tasks or deadlocked")
	}
	recs, err := res.recs, res.err
	require.NoError(t, err)
	pols := scheduler.Policies()
	// Per policy and worker count: 3 overhead cases + 2 grains, × 2 submitter counts.
	require.Len(t, recs, len(pols)*2*(3+2)*2)

	sc := bufio.NewScanner(&out)
	lines := 0
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "line %d", lines)
		for _, k := range []string{"bench", "case", "policy", "workers", "submitters", "tasks", "value", "unit", "peer"} {
			assert.Contains(t, m, k, "line %d", lines)
		}
		lines++
	}
	assert.Equal(t, len(recs), lines)

	for i, r := range recs {
		assert.Greater(t, r.Value, 0.0, "record %d %+v", i, r)
		switch r.Bench {
		case BenchOverhead:
			assert.Equal(t, "us/task", r.Unit)
			assert.Equal(t, 2000, r.Tasks)
		case BenchSize:
			assert.Equal(t, "ratio", r.Unit)
			assert.Equal(t, CaseGrain, r.Case)
			assert.Equal(t, 50*r.Workers, r.Tasks)
			// No upper bound: on a loaded machine the sequential
			// reference can be slowed more than the parallel run, and
			// timings belong in benchmarks, not in pass/fail tests.
			assert.False(t, math.IsInf(r.Value, 0) || math.IsNaN(r.Value), "record %d %+v", i, r)
		default:
			t.Errorf("record %d: bench %q", i, r.Bench)
		}
		want := PeerName(r.Case, r.Policy, r.Workers, r.GrainUS)
		pv, ok := peer[want]
		if !ok || want == "" {
			assert.Empty(t, r.Peer, "record %d", i)
			assert.Nil(t, r.PeerValue, "record %d", i)
			continue
		}
		assert.Equal(t, want, r.Peer)
		require.NotNil(t, r.PeerValue, "record %d", i)
		require.NotNil(t, r.Ratio, "record %d", i)
		assert.Equal(t, pv.Value, *r.PeerValue)
		assert.InDelta(t, r.Value/pv.Value, *r.Ratio, 1e-12)
	}
}

func TestRunBadOptions(t *testing.T) {
	ctx := context.Background()
	for _, o := range []Options{
		{Workers: []int{0}}, {Submitters: []int{-1}}, {Grains: []int{0}}, {Cases: []Case{"nope"}}, {Tasks: 1},
		{Workers: []int{2}, Submitters: []int{3}, SubmittersWork: true},
		{Batch: -1}, {Batch: 64, SubmittersWork: true},
	} {
		_, err := Run(ctx, o, &bytes.Buffer{})
		assert.True(t, errors.Is(err, ErrBadOptions), "%+v: %v", o, err)
	}
	_, err := Run(ctx, Options{Policies: []string{"nope"}, Cases: []Case{CaseIndep}, Tasks: 10, Rounds: 1}, &bytes.Buffer{})
	assert.True(t, errors.Is(err, scheduler.ErrUnknownPolicy), "%v", err)
}

// With SubmittersWork, each submitter is one of the workers: every
// case and policy runs (the task counters inside Run fail it if a task
// is lost or runs twice) and the records say so. With two submitters
// and two workers the scheduler launches none: the run ends only
// because the submitters run every task (Driver.Submit, Driver.WaitAll).
func TestRunSubmittersWork(t *testing.T) {
	// A bound on a hang, not a speed check: 2-3 s alone under -race,
	// past 60 s once on a 2-core machine running other test binaries.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts := Options{Workers: []int{2}, Submitters: []int{1, 2}, Tasks: 2000, Rounds: 2, Grains: []int{16}, GrainTasks: 50,
		SubmittersWork: true, SchedulerOptions: []scheduler.Option{scheduler.WithPerfModelDir("")}}
	recs, err := Run(ctx, opts, io.Discard)
	require.NoError(t, err)
	pols := scheduler.Policies()
	require.Len(t, recs, len(pols)*(3+1)*2, "per policy: 3 overhead cases and 1 grain, x 2 submitter counts")
	for _, r := range recs {
		assert.True(t, r.SubmittersWork, "%+v", r)
		assert.Greater(t, r.Value, 0.0, "%+v", r)
	}
}

// With Batch, each submitter fills and flushes a scheduler.Batch: every
// case and policy runs (the task counters inside Run fail it if a task is
// lost or runs twice), with a batch size that does not divide the task
// count, and the records carry the size.
func TestRunBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := Options{Workers: []int{2}, Submitters: []int{1, 2}, Tasks: 2000, Rounds: 2, Grains: []int{16}, GrainTasks: 50,
		Batch: 300, SchedulerOptions: []scheduler.Option{scheduler.WithPerfModelDir("")}}
	var out bytes.Buffer
	recs, err := Run(ctx, opts, &out)
	require.NoError(t, err)
	require.Len(t, recs, len(scheduler.Policies())*(3+1)*2, "per policy: 3 overhead cases and 1 grain, x 2 submitter counts")
	for _, r := range recs {
		assert.Equal(t, 300, r.Batch, "%+v", r)
		assert.Greater(t, r.Value, 0.0, "%+v", r)
	}
	assert.Contains(t, out.String(), `"batch":300`)
}

// RunStarPU against the real StarPU when it is installed; otherwise
// ErrNoStarPU.
func TestRunStarPU(t *testing.T) {
	if testing.Short() {
		t.Skip("runs StarPU programs")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	p, err := RunStarPU(ctx, StarPUConfig{Policies: []string{"lws", "prio"}, Workers: 2, Tasks: 2000, Rounds: 1, GrainTasks: 20, Grains: []int{1, 16}})
	if errors.Is(err, ErrNoStarPU) {
		t.Skipf("StarPU not installed: %v", err)
	}
	require.NoError(t, err)
	for _, c := range []Case{CaseIndep, CaseChain, CaseHandles4} {
		for _, w := range []int{2, 1} {
			name := PeerName(c, "lws", w, 0)
			assert.Greater(t, p[name].Value, 0.0, name)
		}
	}
	for _, g := range []int{1, 16} {
		for _, w := range []int{1, 2} {
			name := PeerName(CaseGrain, "lws", w, g)
			assert.Greater(t, p[name].Value, 0.0, name)
		}
	}
	for k := range p {
		assert.NotContains(t, k, "prio", "StarPU has no pz prio policy")
	}
}

// BenchmarkTasks is the overhead part of `pzrun bench tasks` as a Go
// benchmark: µs per task for each case, policy and submitter count
// (2 workers; one timed round of b.N tasks, the counters checked), with
// the submitters apart from the workers or among them (SubmittersWork).
//
//	go test -run '^$' -bench Tasks -benchtime 100000x ./internal/apps/benchtasks/
func BenchmarkTasks(b *testing.B) {
	for _, c := range []Case{CaseIndep, CaseChain, CaseHandles4} {
		for _, pol := range scheduler.Policies() {
			for _, sub := range []int{1, 2} {
				for _, works := range []bool{false, true} {
					b.Run(fmt.Sprintf("%s/%s/submitters=%d/works=%v", c, pol, sub, works), func(b *testing.B) {
						ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
						defer cancel()
						bn, err := newBench(ctx, pol, 2, sub*btoi(works), scheduler.WithPerfModelDir(""))
						require.NoError(b, err)
						defer func() { require.NoError(b, bn.close()) }()
						m, err := overhead(ctx, bn, c, sub, max(2, b.N), 1, nil, 2, nil)
						require.NoError(b, err)
						b.ReportMetric(m.pz, "us/task")
					})
				}
			}
		}
	}
}
