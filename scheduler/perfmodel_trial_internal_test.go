package scheduler

import (
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestModelSaveMergesConcurrentRuns: two schedulers that loaded one
// calibrated entry and measured it each save it with both runs'
// measurements - the file's count, mean and deviation are those of
// every measurement - where the last to save used to write its own
// count only, losing the other's (see
// TestModelTwoSchedulersKeepEachOthersEntries).
func TestModelSaveMergesConcurrentRuns(t *testing.T) {
	dir := t.TempDir()
	m := &PerfModel{Name: "m"}
	base := newModelStore(dir)
	for range 10 {
		base.record(m, &Task{footprint: 7}, CPUWorker, 1000)
	}
	require.NoError(t, base.save())

	a, b := newModelStore(dir), newModelStore(dir)
	for range 5 {
		a.record(m, &Task{footprint: 7}, CPUWorker, 1200)
		b.record(m, &Task{footprint: 7}, CPUWorker, 800)
	}
	require.NoError(t, a.save())
	require.NoError(t, b.save())

	entries, err := newModelStore(dir).load("m")
	require.NoError(t, err)
	e := entries[modelKey{7, CPUWorker}]
	require.NotNil(t, e)
	assert.Equal(t, int64(20), e.n)
	assert.InDelta(t, 1000, e.mean, 1e-9)
	assert.InDelta(t, math.Sqrt(20000), math.Sqrt(e.m2/float64(e.n)), 1e-6)

	// An entry that started again (its times changed for good) replaces
	// the file's, merged with nothing.
	c := newModelStore(dir)
	for range 20 {
		c.record(m, &Task{footprint: 7}, CPUWorker, 5000)
	}
	require.NoError(t, c.save())
	entries, err = newModelStore(dir).load("m")
	require.NoError(t, err)
	e = entries[modelKey{7, CPUWorker}]
	assert.Equal(t, int64(1), e.n)
	assert.Equal(t, 5000.0, e.mean)
}

// TestModelSaveKeepsFileSpoiledMeanwhile: a model file that another
// program spoiled after this scheduler loaded it is neither merged into
// nor overwritten; save says so.
func TestModelSaveKeepsFileSpoiledMeanwhile(t *testing.T) {
	dir := t.TempDir()
	m := &PerfModel{Name: "m"}
	a := newModelStore(dir)
	a.record(m, &Task{footprint: 1}, CPUWorker, 100)
	require.NoError(t, a.save())
	a.record(m, &Task{footprint: 1}, CPUWorker, 100)
	require.NoError(t, os.WriteFile(a.path("m"), []byte("{"), 0o644))
	err := a.save()
	require.ErrorIs(t, err, ErrBadModel)
	assert.Contains(t, err.Error(), "this run's measurements of the model are not saved")
	b, rerr := os.ReadFile(a.path("m"))
	require.NoError(t, rerr)
	assert.Equal(t, "{", string(b))
}

// TestModelFileName: a file name stays within 255 bytes, cut at an
// escape's start, and two long names sharing their start have files of
// their own; a name that fits keeps its file name.
func TestModelFileName(t *testing.T) {
	assert.Equal(t, "gemm.h.json", modelFileName("gemm", "h"))
	long := modelFileName(string(make([]byte, 200)), "host") // 600 bytes escaped
	assert.LessOrEqual(t, len(long), maxFileName)
	assert.Regexp(t, `^(%00)+~[0-9a-f]{16}\.host\.json$`, long)
	seen := map[string]bool{}
	for _, n := range []string{string(make([]byte, 200)), string(make([]byte, 201)), string(make([]byte, 85)) + "x"} {
		f := modelFileName(n, "host")
		assert.False(t, seen[f], f)
		seen[f] = true
	}
}

// TestModelSaveRemovesDeadWritersTemps is the regression test for the
// temporary files of a process killed while it saved a model, which
// stayed in the model directory for ever: a save, holding the
// directory's lock that every writer holds while its temporary file
// exists, removes them, and nothing else.
func TestModelSaveRemovesDeadWritersTemps(t *testing.T) {
	dir := t.TempDir()
	m := &PerfModel{Name: "m"}
	a := newModelStore(dir)
	a.record(m, &Task{footprint: 7}, CPUWorker, 1000)
	require.NoError(t, a.save())
	good, err := os.ReadFile(a.path("m"))
	require.NoError(t, err)

	// What a writer killed between its write and its rename leaves: the
	// model, cut short, in a file named as writeFileLocked names it.
	dead := filepath.Join(dir, tempName(1<<22+1, 1700000000123456789, 0))
	require.NoError(t, os.WriteFile(dead, good[:len(good)/2], 0o644))
	keep := []string{".tmp-notes", "x.tmp", ".tmp-1-2", ".tmp-1-2-3-4", ".tmp-1-x-3", ".tmp--2-3"}
	for _, k := range keep {
		require.NoError(t, os.WriteFile(filepath.Join(dir, k), nil, 0o644))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, tempName(1, 2, 3)), 0o755))
	keep = append(keep, tempName(1, 2, 3)) // not a file: not ours

	a.record(m, &Task{footprint: 7}, CPUWorker, 1000)
	require.NoError(t, a.save())
	_, err = os.Stat(dead)
	assert.ErrorIs(t, err, fs.ErrNotExist, "the dead writer's file is removed")
	for _, k := range keep {
		_, err := os.Stat(filepath.Join(dir, k))
		assert.NoError(t, err, "%s is kept", k)
	}
	entries, err := newModelStore(dir).load("m")
	require.NoError(t, err)
	assert.Equal(t, int64(2), entries[modelKey{7, CPUWorker}].n)
}
