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

// modelCodelet returns a quick codelet with the history model name.
func modelCodelet(name string) *scheduler.Codelet {
	return &scheduler.Codelet{Name: "work", Model: scheduler.HistoryModel(name), CPU: func(*scheduler.Call) error { return nil }}
}

// calibrate runs enough tasks of cl in a scheduler with model directory
// dir for its model to be calibrated on a CPU worker, and returns
// Close's error.
func calibrate(t *testing.T, dir string, cls ...*scheduler.Codelet) error {
	t.Helper()
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPerfModelDir(dir), scheduler.WithGetenv(func(string) string { return "" }))
	require.NoError(t, err)
	for _, cl := range cls {
		for range 12 { // more than the 10 samples a model needs
			require.NoError(t, s.Submit(ctx, cl))
		}
	}
	require.NoError(t, s.WaitAll(ctx))
	return s.Close()
}

// calibrated reports whether cl's model is calibrated for a CPU worker
// in a new scheduler with model directory dir, and returns its estimate
// and the scheduler's Close error after running a few more tasks.
func calibrated(t *testing.T, dir string, cl *scheduler.Codelet) (float64, bool, error) {
	t.Helper()
	ctx := testCtx(t)
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPerfModelDir(dir), scheduler.WithGetenv(func(string) string { return "" }))
	require.NoError(t, err)
	ns, ok := s.ModelEstimate(cl, scheduler.CPUWorker)
	for range 3 {
		require.NoError(t, s.Submit(ctx, cl))
	}
	require.NoError(t, s.WaitAll(ctx))
	return ns, ok, s.Close()
}

// modelFile returns the only file of the model name in dir.
func modelFile(t *testing.T, dir, name string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, name+".*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1, "the files of model %q", name)
	return files[0]
}

// TestModelFileInvalid is the regression test for model files used
// without any check: a count of -3 made the estimate NaN and every
// Close fail, a negative mean steered dmda, and a file that did not
// parse was dropped and overwritten, its calibration lost. A file that
// cannot be parsed or holds invalid values is not used and is kept as
// it is, and Close reports it, naming the file and what is wrong.
func TestModelFileInvalid(t *testing.T) {
	const name = "m"
	cl := modelCodelet(name)
	entry := func(f func(e map[string]any)) func([]byte) []byte {
		return func(b []byte) []byte {
			var m map[string]any
			require.NoError(t, json.Unmarshal(b, &m))
			f(m["entries"].([]any)[0].(map[string]any))
			out, err := json.Marshal(m)
			require.NoError(t, err)
			return out
		}
	}
	for _, tc := range []struct {
		name string
		edit func([]byte) []byte
		want string // in Close's error; "" for none
	}{
		{"valid", func(b []byte) []byte { return b }, ""},
		{"negative n", entry(func(e map[string]any) { e["n"] = -3 }), "n = -3, want >= 0"},
		{"negative size", entry(func(e map[string]any) { e["size"] = -1 }), "size = -1, want bytes >= 0"},
		{"negative mean", entry(func(e map[string]any) { e["mean_ns"] = -1e12 }), "mean_ns = -1e+12, want a time >= 0"},
		{"negative stddev", entry(func(e map[string]any) { e["stddev_ns"] = -1 }), "stddev_ns = -1, want a time >= 0"},
		{"overflowing stddev", entry(func(e map[string]any) { e["stddev_ns"] = 1e200 }), "overflows"},
		{"unknown kind", entry(func(e map[string]any) { e["kind"] = "tpu" }), `kind "tpu"): unknown worker kind`},
		{"duplicate entry", func(b []byte) []byte {
			var m map[string]any
			require.NoError(t, json.Unmarshal(b, &m))
			m["entries"] = append(m["entries"].([]any), m["entries"].([]any)[0])
			out, _ := json.Marshal(m)
			return out
		}, "appears twice"},
		{"out of range", func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"mean_ns":`, `"mean_ns": 1e999, "x":`, 1))
		}, "not a model file"},
		{"truncated", func(b []byte) []byte { return b[:60] }, "not a model file: unexpected end of JSON input"},
		{"empty", func([]byte) []byte { return nil }, "not a model file"},
		{"another model", func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"model": "m"`, `"model": "other"`, 1))
		}, `it holds model "other", not "m"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, calibrate(t, dir, cl))
			path := modelFile(t, dir, name)
			good, err := os.ReadFile(path)
			require.NoError(t, err)
			bad := tc.edit(good)
			require.NoError(t, os.WriteFile(path, bad, 0o644))

			ns, ok, err := calibrated(t, dir, cl)
			if tc.want == "" {
				require.NoError(t, err)
				assert.True(t, ok)
				assert.GreaterOrEqual(t, ns, 0.0)
				return
			}
			assert.False(t, ok, "an invalid file is not used")
			require.ErrorIs(t, err, scheduler.ErrBadModel)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), tc.want)
			after, rerr := os.ReadFile(path)
			require.NoError(t, rerr)
			assert.Equal(t, string(bad), string(after), "the file is kept as it was")
		})
	}
}

// TestModelNamesShareNoFile is the regression test for model names that
// differed only in other characters than letters, digits, '.', '-' and
// '_' and shared one file, each run wiping the other's calibration:
// every name has a file of its own, and a name of those characters only
// keeps the file name it had.
func TestModelNamesShareNoFile(t *testing.T) {
	dir := t.TempDir()
	names := []string{"a/b", "a_b", "a b", "a%2Fb", "a\\b"}
	var cls []*scheduler.Codelet
	for _, n := range names {
		cls = append(cls, modelCodelet(n))
	}
	require.NoError(t, calibrate(t, dir, cls...))
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	assert.Len(t, files, len(names), "%v", files)
	modelFile(t, dir, "a_b")     // the name it always had
	modelFile(t, dir, "a%2Fb")   // a/b
	modelFile(t, dir, "a%252Fb") // a%2Fb
	for _, cl := range cls {
		_, ok, err := calibrated(t, dir, cl)
		require.NoError(t, err)
		assert.True(t, ok, "model %q kept its calibration", cl.Model.Name)
	}
}

// TestModelFileOfEarlierVersion: a file an earlier pz wrote for a name
// with other characters (a/b in a_b's file) is not taken for a_b's, nor
// overwritten; the error says which name it now belongs to.
func TestModelFileOfEarlierVersion(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, calibrate(t, dir, modelCodelet("a_b")))
	path := modelFile(t, dir, "a_b")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	old := strings.Replace(string(b), `"model": "a_b"`, `"model": "a/b"`, 1)
	require.NoError(t, os.WriteFile(path, []byte(old), 0o644))
	_, ok, err := calibrated(t, dir, modelCodelet("a_b"))
	assert.False(t, ok)
	require.ErrorIs(t, err, scheduler.ErrBadModel)
	assert.Contains(t, err.Error(), `it holds model "a/b", whose file is now a%2Fb.`)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, old, string(after))
}

// TestModelEmptyName is the regression test for a model with an empty
// name, which wrote a hidden file ".host.json": Submit refuses it.
func TestModelEmptyName(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPerfModelDir(dir))
	require.NoError(t, err)
	cl := modelCodelet("")
	err = s.Submit(ctx, cl)
	require.ErrorIs(t, err, scheduler.ErrBadModel)
	assert.Contains(t, err.Error(), `codelet "work"`)
	assert.Contains(t, err.Error(), "empty name")
	_, ok := s.ModelEstimate(cl, scheduler.CPUWorker)
	assert.False(t, ok)
	require.NoError(t, s.Close())
	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, files)
}

// TestModelDirUnwritable is the regression test for an unwritable model
// directory that failed New when the scheduler had devices (the bus
// model's save) but only Close without them: with or without devices,
// the scheduler runs, and Close reports every model it could not save.
func TestModelDirUnwritable(t *testing.T) {
	ctx := testCtx(t)
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	dir := filepath.Join(file, "models") // under a file: not creatable, even by root
	for _, tc := range []struct {
		name string
		opts []scheduler.Option
		want []string
	}{
		{"cpu only", nil, []string{`saving performance model "m"`}},
		{"simulated device", []scheduler.Option{scheduler.WithSimDevices(scheduler.SimDevice{})}, []string{`saving performance model "m"`, "saving the bus model of"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]scheduler.Option{scheduler.WithWorkers(1), scheduler.WithPerfModelDir(dir), scheduler.WithGetenv(func(string) string { return "" })}, tc.opts...)
			s, err := scheduler.New(ctx, opts...)
			require.NoError(t, err)
			if len(tc.opts) > 0 {
				assert.Len(t, s.Bus(), 2, "the bus is measured")
			}
			cl := modelCodelet("m")
			for range 12 {
				require.NoError(t, s.Submit(ctx, cl))
			}
			require.NoError(t, s.WaitAll(ctx))
			if len(tc.opts) == 0 { // with a device, the tasks are shared
				_, ok := s.ModelEstimate(cl, scheduler.CPUWorker)
				assert.True(t, ok, "calibrated in memory")
			}
			err = s.Close()
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Contains(t, err.Error(), dir)
		})
	}
}

// TestModelFileOfSizelessVersion: a model file written before entries
// recorded the size of their tasks' data (testdata/perfmodel-v1.json,
// written by pz at 95b2b05 for the tasks below) is still used; an entry
// measured again gains its size, summed over the task's accesses, and
// the others are saved as they were.
func TestModelFileOfSizelessVersion(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	old, err := os.ReadFile(filepath.Join("testdata", "perfmodel-v1.json"))
	require.NoError(t, err)
	require.NotContains(t, string(old), `"size"`)
	host, err := os.Hostname()
	require.NoError(t, err)
	path := filepath.Join(dir, "oldformat."+host+".json")
	require.NoError(t, os.WriteFile(path, old, 0o644))

	s, err := scheduler.New(ctx, scheduler.WithWorkers(1), scheduler.WithPerfModelDir(dir), scheduler.WithGetenv(func(string) string { return "" }))
	require.NoError(t, err)
	cl := modelCodelet("oldformat")
	v, err := s.RegisterVector(make([]float64, 256))
	require.NoError(t, err)
	m, err := s.RegisterMatrix(make([]float32, 8*16), 8, 16)
	require.NoError(t, err)
	w, err := s.RegisterVector(make([]float64, 512))
	require.NoError(t, err)
	ns, ok := s.ModelEstimate(cl, scheduler.CPUWorker, scheduler.R(v), scheduler.RW(m))
	require.True(t, ok, "the old file's entry is used")
	assert.Equal(t, 935.5833333333334, ns)
	ns, ok = s.ModelEstimate(cl, scheduler.CPUWorker, scheduler.R(w))
	require.True(t, ok)
	assert.Equal(t, 55.916666666666664, ns)
	for range 3 {
		require.NoError(t, s.Submit(ctx, cl, scheduler.R(v), scheduler.RW(m)))
	}
	require.NoError(t, s.WaitAll(ctx))
	require.NoError(t, s.Close())

	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var f struct {
		Entries []struct {
			Footprint uint64  `json:"footprint"`
			Size      *int64  `json:"size"`
			N         int64   `json:"n"`
			MeanNs    float64 `json:"mean_ns"`
		} `json:"entries"`
	}
	require.NoError(t, json.Unmarshal(b, &f))
	require.Len(t, f.Entries, 2, "%s", b)
	ran := scheduler.NewTask(cl, scheduler.R(v), scheduler.RW(m)).Footprint()
	for _, e := range f.Entries {
		if e.Footprint == ran {
			require.NotNil(t, e.Size, "measured again: %s", b)
			assert.Equal(t, int64(256*8+8*16*4), *e.Size, "bytes of the vector and the matrix")
			assert.GreaterOrEqual(t, e.N, int64(12), "merged into the file's 12 (an outlier may be left out)")
			continue
		}
		assert.Equal(t, scheduler.NewTask(cl, scheduler.R(w)).Footprint(), e.Footprint)
		assert.Nil(t, e.Size, "not measured again: no size")
		assert.Equal(t, int64(12), e.N)
		assert.Equal(t, 55.916666666666664, e.MeanNs)
	}
}
