package scheduler_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// vectorCodelet is a quick codelet with the history model name whose
// tasks take one vector, so that each vector length is a footprint.
func vectorCodelet(name string) *scheduler.Codelet {
	return &scheduler.Codelet{Name: "vec", Model: scheduler.HistoryModel(name), CPU: func(*scheduler.Call) error { return nil }}
}

// TestModelTwoSchedulersKeepEachOthersEntries is the regression test for
// two schedulers of one process (in-process ranks) calibrating one model
// in one directory: each saved the model as it had it in memory at
// Close, so the last to close erased the entries the other had measured
// (found in a helper trial: two schedulers calibrating "shared" for
// vectors of 10 and 20 elements left a file of one entry). Close merges
// its measurements into the file as it is then.
func TestModelTwoSchedulersKeepEachOthersEntries(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	cl := vectorCodelet("shared")
	noEnv := scheduler.WithGetenv(func(string) string { return "" })
	var scheds []*scheduler.Scheduler
	var hs []*scheduler.Handle
	for i := range 2 {
		s, err := scheduler.New(ctx, scheduler.WithPolicy("dmda"), scheduler.WithWorkers(1), scheduler.WithPerfModelDir(dir), noEnv)
		require.NoError(t, err)
		h, err := s.RegisterVector(make([]float64, 10*(i+1)))
		require.NoError(t, err)
		for range 12 {
			require.NoError(t, s.Submit(ctx, cl, scheduler.RW(h)))
		}
		require.NoError(t, s.WaitAll(ctx))
		_, ok := s.ModelEstimate(cl, scheduler.CPUWorker, scheduler.RW(h))
		require.True(t, ok)
		scheds, hs = append(scheds, s), append(hs, h)
	}
	for _, s := range scheds {
		require.NoError(t, s.Close())
	}
	var f struct {
		Entries []json.RawMessage `json:"entries"`
	}
	b, err := os.ReadFile(modelFile(t, dir, "shared"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &f))
	assert.Len(t, f.Entries, 2, "one entry per vector length:\n%s", b)

	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPerfModelDir(dir), noEnv)
	require.NoError(t, err)
	for i := range 2 {
		h, err := s.RegisterVector(make([]float64, 10*(i+1)))
		require.NoError(t, err)
		_, ok := s.ModelEstimate(cl, scheduler.CPUWorker, scheduler.RW(h))
		assert.True(t, ok, "the entry of length %d is calibrated", 10*(i+1))
	}
	require.NoError(t, s.Close())
}

// TestModelLongName is the regression test for model names whose file
// name was longer than a directory entry may be (255 bytes): 30 CJK
// characters, escaped to 270 bytes, or 250 ASCII letters. Every Close
// failed with "file name too long", blaming a model file that did not
// exist ("the file was not used and is kept as it is: fix or remove
// it"), and the model was never saved (found in a helper trial). Such a
// name's file name is cut and ends with a hash of the whole name.
func TestModelLongName(t *testing.T) {
	dir := t.TempDir()
	names := []string{
		strings.Repeat("日", 30),
		strings.Repeat("x", 250),
		strings.Repeat("x", 249) + "y", // the same start: a file of its own
		strings.Repeat("é", 120),
	}
	var cls []*scheduler.Codelet
	for _, n := range names {
		cls = append(cls, modelCodelet(n))
	}
	require.NoError(t, calibrate(t, dir, cls...))
	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, files, len(names))
	for _, f := range files {
		assert.LessOrEqual(t, len(f.Name()), 255, f.Name())
	}
	for _, cl := range cls {
		_, ok, err := calibrated(t, dir, cl)
		require.NoError(t, err)
		assert.True(t, ok, "model %q kept its calibration", cl.Model.Name)
	}
}

// TestModelFileMode is the regression test for model files written
// readable by their owner only (0600, os.CreateTemp's mode), unlike the
// program's other files, so that a model directory shared by a team was
// not: a new file gets 0644 less the umask, as os.WriteFile gives, and a
// file whose mode was changed keeps it.
func TestModelFileMode(t *testing.T) {
	dir := t.TempDir()
	probe := filepath.Join(t.TempDir(), "probe")
	require.NoError(t, os.WriteFile(probe, nil, 0o644))
	want, err := os.Stat(probe)
	require.NoError(t, err)

	cl := modelCodelet("mode")
	require.NoError(t, calibrate(t, dir, cl))
	path := modelFile(t, dir, "mode")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, want.Mode().Perm(), fi.Mode().Perm())

	require.NoError(t, os.Chmod(path, 0o664))
	require.NoError(t, calibrate(t, dir, cl))
	fi, err = os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o664), fi.Mode().Perm())
}
