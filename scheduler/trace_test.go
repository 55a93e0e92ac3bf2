package scheduler_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// TestTraceFileNotSVG is the regression test for WithTrace("x.svg"),
// whose Gantt chart, written beside the trace with the extension
// replaced by .svg, silently overwrote the trace: New refuses such a
// file, from the option or the environment, and WriteTraceFiles writes
// nothing for it.
func TestTraceFileNotSVG(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	for _, name := range []string{"x.svg", "x.SVG"} {
		path := filepath.Join(dir, name)
		_, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPerfModelDir(""), scheduler.WithTrace(path))
		require.ErrorIs(t, err, scheduler.ErrBadOption, name)
		assert.Contains(t, err.Error(), `WithTrace("`+path+`")`)
		assert.Contains(t, err.Error(), "x.json", "the error suggests a name")

		env := scheduler.WithGetenv(func(k string) string {
			if k == "PZ_TRACE" {
				return path
			}
			return ""
		})
		_, err = scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPerfModelDir(""), env)
		require.ErrorIs(t, err, scheduler.ErrBadOption, name)
		assert.Contains(t, err.Error(), "PZ_TRACE")
	}

	s := newSched(t, scheduler.WithWorkers(1), scheduler.WithStats(true))
	err := s.WriteTraceFiles(filepath.Join(dir, "y.svg"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "y.svg")
	_, err = os.Stat(filepath.Join(dir, "y.svg"))
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing written")

	// Without an extension, the chart gets one.
	require.NoError(t, s.WriteTraceFiles(filepath.Join(dir, "z")))
	for _, f := range []string{"z", "z.svg"} {
		_, err := os.Stat(filepath.Join(dir, f))
		assert.NoError(t, err, f)
	}
}

// TestWriteWithoutRecording is the regression test for WriteGantt and
// WriteTrace that wrote an empty chart or trace, and returned nil, for
// a scheduler that records nothing: they return ErrNotRecording, naming
// the options to enable, and write nothing.
func TestWriteWithoutRecording(t *testing.T) {
	ctx := testCtx(t)
	s := newSched(t, scheduler.WithWorkers(1))
	require.False(t, s.Recording())
	cl := &scheduler.Codelet{Name: "quick", CPU: func(*scheduler.Call) error { return nil }}
	require.NoError(t, s.Submit(ctx, cl))
	require.NoError(t, s.WaitAll(ctx))
	for name, write := range map[string]func(*bytes.Buffer) error{
		"WriteGantt": func(b *bytes.Buffer) error { return s.WriteGantt(b) },
		"WriteTrace": func(b *bytes.Buffer) error { return s.WriteTrace(b) },
	} {
		var buf bytes.Buffer
		err := write(&buf)
		require.ErrorIs(t, err, scheduler.ErrNotRecording, name)
		assert.Contains(t, err.Error(), name)
		assert.Contains(t, err.Error(), "WithStats(true)")
		assert.Contains(t, err.Error(), "WithTrace")
		assert.Zero(t, buf.Len(), name)
	}
	dir := t.TempDir()
	require.ErrorIs(t, s.WriteTraceFiles(filepath.Join(dir, "t.json")), scheduler.ErrNotRecording)
	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, files)

	// With statistics, both write.
	r := newSched(t, scheduler.WithWorkers(1), scheduler.WithStats(true))
	require.NoError(t, r.Submit(ctx, cl))
	require.NoError(t, r.WaitAll(ctx))
	var svg, tr bytes.Buffer
	require.NoError(t, r.WriteGantt(&svg))
	require.NoError(t, r.WriteTrace(&tr))
	assert.True(t, strings.HasPrefix(svg.String(), "<svg"))
	assert.Contains(t, tr.String(), `"quick"`)
}

// A trace whose directory does not exist (or that names a directory) is
// refused by New, not found out by Close after the whole run.
func TestTracePathCheckedAtNew(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	for path, want := range map[string]string{
		filepath.Join(dir, "missing", "t.json"): "create it first",
		dir:                                     "is a directory",
	} {
		_, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPerfModelDir(""), scheduler.WithTrace(path))
		require.ErrorIs(t, err, scheduler.ErrBadOption, path)
		assert.Contains(t, err.Error(), want)
	}
}
