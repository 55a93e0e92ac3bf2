package scheduler_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestGanttTeamCriticalPath: a team task is one task on the critical path,
// run by all its members, and every member's bar is outlined.
func TestGanttTeamCriticalPath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithStats(true), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	defer s.Close()
	nap := &scheduler.Codelet{Name: "nap", CPU: func(*scheduler.Call) error { time.Sleep(2 * time.Millisecond); return nil }}
	team := &scheduler.Codelet{Name: "team", Parallel: scheduler.SPMD, CPU: func(*scheduler.Call) error {
		time.Sleep(2 * time.Millisecond)
		return nil
	}}
	var x int
	h, err := s.RegisterValue(&x)
	require.NoError(t, err)
	require.NoError(t, s.Submit(ctx, nap, scheduler.RW(h)))
	require.NoError(t, s.Submit(ctx, team, scheduler.RW(h), scheduler.WithTeam(2)))
	require.NoError(t, s.Submit(ctx, nap, scheduler.RW(h)))
	require.NoError(t, s.WaitAll(ctx))

	path := s.CriticalPath()
	require.Len(t, path, 3)
	assert.Equal(t, []string{"nap", "team", "nap"}, []string{path[0].Name, path[1].Name, path[2].Name})
	assert.ElementsMatch(t, []int{0, 1}, path[1].Workers, "the team's members")
	for i := 1; i < len(path); i++ {
		assert.LessOrEqual(t, path[i-1].End, path[i].Start, "in order")
	}

	var svg strings.Builder
	require.NoError(t, s.WriteGantt(&svg, scheduler.GanttCriticalPath()))
	assert.Equal(t, 4, strings.Count(svg.String(), `class="critical"`), "nap, both members of team, nap")
	assert.Contains(t, svg.String(), ">cpu0</text>")
	assert.Contains(t, svg.String(), ">cpu1</text>")
}

// TestGanttPlain: without options nothing is outlined; WriteTraceFiles
// writes the same chart beside the trace.
// A task that failed or panicked is outlined as failed in the chart, its
// error's first line (not a panic's stack) in the tooltip.
func TestGanttFailedTasks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithStats(true), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	defer s.Close()
	ok := &scheduler.Codelet{Name: "ok", CPU: func(*scheduler.Call) error { return nil }}
	bad := &scheduler.Codelet{Name: "bad", CPU: func(*scheduler.Call) error { return errors.New("not positive definite") }}
	boom := &scheduler.Codelet{Name: "boom", CPU: func(*scheduler.Call) error { panic("boom") }}
	for _, cl := range []*scheduler.Codelet{ok, bad, ok, boom} {
		require.NoError(t, s.Submit(ctx, cl))
	}
	require.Error(t, s.WaitAll(ctx))
	var svg strings.Builder
	require.NoError(t, s.WriteGantt(&svg))
	out := svg.String()
	assert.Equal(t, 2, strings.Count(out, `<rect class="failed"`), "bad and boom")
	assert.Regexp(t, `of codelet &#34;bad&#34; failed on worker \d: not positive definite</title>`, out)
	assert.Contains(t, out, ">failed task</text>")
	assert.NotContains(t, out, "goroutine ", "a panic's stack stays out of the chart")
}

func TestGanttPlain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dir := t.TempDir()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(2), scheduler.WithStats(true), scheduler.WithPerfModelDir(""))
	require.NoError(t, err)
	cl := &scheduler.Codelet{Name: "gemm", CPU: func(*scheduler.Call) error { return nil }}
	for range 8 {
		require.NoError(t, s.Submit(ctx, cl))
	}
	require.NoError(t, s.WaitAll(ctx))
	var svg strings.Builder
	require.NoError(t, s.WriteGantt(&svg))
	assert.NotContains(t, svg.String(), `class="critical"`)
	assert.Contains(t, svg.String(), ">gemm: 8 runs, ")
	assert.Contains(t, svg.String(), "8 tasks on 2 workers")
	require.NoError(t, s.WriteTraceFiles(filepath.Join(dir, "t.json")))
	require.NoError(t, s.Close())
	b, err := os.ReadFile(filepath.Join(dir, "t.svg"))
	require.NoError(t, err)
	assert.Contains(t, string(b), ">gemm: 8 runs, ")
	assert.Len(t, s.CriticalPath(), 1, "independent tasks: a path of one")
}

// TestGanttContextBandsDistinct: the bands of two contexts of a chart
// have different colours (as drawn in the legend), for pairs of names
// that a hash into hues gave the same or a barely different colour.
func TestGanttContextBandsDistinct(t *testing.T) {
	ctx := testCtx(t)
	re := regexp.MustCompile(`fill="(#[0-9a-f]{6})"/><text[^>]*>context ([^<]+)<`)
	for _, pair := range [][2]string{{"left", "right"}, {"A", "B"}, {"small", "large"}, {"solver1", "solver2"}} {
		s := newSched(t, scheduler.WithWorkers(2), scheduler.WithStats(true))
		a, err := s.NewContext(pair[0], scheduler.ContextWorkers(0))
		require.NoError(t, err)
		b, err := s.NewContext(pair[1], scheduler.ContextWorkers(1))
		require.NoError(t, err)
		require.NoError(t, s.Submit(ctx, clEmpty, scheduler.InContext(a)))
		require.NoError(t, s.Submit(ctx, clEmpty, scheduler.InContext(b)))
		require.NoError(t, s.WaitAll(ctx))
		waitResize(t, s, 0, "add")
		waitResize(t, s, 1, "add")
		var svg strings.Builder
		require.NoError(t, s.WriteGantt(&svg))
		colors := map[string]string{}
		for _, m := range re.FindAllStringSubmatch(svg.String(), -1) {
			colors[m[2]] = m[1]
		}
		require.Contains(t, colors, pair[0], "%v", pair)
		require.Contains(t, colors, pair[1], "%v", pair)
		assert.NotEqual(t, colors[pair[0]], colors[pair[1]], "%v", pair)
		assert.NotEqual(t, colors[pair[0]], colors[scheduler.GlobalName], "%v", pair)
		require.NoError(t, s.Close())
	}
}

// TestGanttColorsSkipNoCodelet: a codelet whose tasks were all canceled
// draws no bar but keeps its turn in the palette, so the codelets after
// it have the colours of a run where it ran (they shifted by one).
func TestGanttColorsSkipNoCodelet(t *testing.T) {
	ctx := testCtx(t)
	re := regexp.MustCompile(`fill="(#[0-9a-f]{6})"/><text[^>]*>([a-z]+): \d+ runs?,`)
	legend := func(failFirst bool) map[string]string {
		s := newSched(t, scheduler.WithWorkers(2), scheduler.WithStats(true))
		h, err := s.RegisterVector(make([]float64, 1))
		require.NoError(t, err)
		first := &scheduler.Codelet{Name: "first", CPU: func(*scheduler.Call) error {
			if failFirst {
				return errors.New("bad input")
			}
			return nil
		}}
		second := &scheduler.Codelet{Name: "second", CPU: func(*scheduler.Call) error { return nil }}
		third := &scheduler.Codelet{Name: "third", CPU: func(*scheduler.Call) error { return nil }}
		require.NoError(t, s.Submit(ctx, first, scheduler.RW(h)))
		require.NoError(t, s.Submit(ctx, second, scheduler.RW(h))) // canceled when first fails
		require.NoError(t, s.Submit(ctx, third))
		_ = s.WaitAll(ctx)
		var svg strings.Builder
		require.NoError(t, s.WriteGantt(&svg))
		out := map[string]string{}
		for _, m := range re.FindAllStringSubmatch(svg.String(), -1) {
			out[m[2]] = m[1]
		}
		require.NoError(t, s.Close())
		return out
	}
	ok, failed := legend(false), legend(true)
	require.Contains(t, ok, "third")
	require.Contains(t, failed, "third")
	assert.NotContains(t, failed, "second", "second's task was canceled: no bar")
	assert.Equal(t, ok["third"], failed["third"])
	assert.Equal(t, ok["first"], failed["first"])
}
