package logger_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/pzgo/pz/internal/lockedbuf"
	"github.com/pzgo/pz/logger"
)

type line struct {
	Level string `json:"level"`
	Msg   string `json:"msg"`
	Rank  *int   `json:"rank"`
	Time  string `json:"ts"`
}

// parseJSON decodes one JSON object per line.
func parseJSON(t *testing.T, s string) []line {
	t.Helper()
	var out []line
	for l := range strings.Lines(s) {
		var v line
		require.NoError(t, json.Unmarshal([]byte(l), &v), "line %q", l)
		require.NotNil(t, v.Rank, "every line carries the rank: %q", l)
		out = append(out, v)
	}
	return out
}

// noEnv ignores the process environment so tests do not depend on it.
var noEnv = logger.WithEnv(nil)

// env returns a lookup over m.
func env(m map[string]string) logger.Option {
	return logger.WithEnv(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
}

// logOnRanks builds a logger for each of size in-process ranks, has every
// rank log on both loggers concurrently, and returns what was written.
func logOnRanks(t *testing.T, size int, opts ...logger.Option) string {
	t.Helper()
	buf := &lockedbuf.Buffer{}
	var wg sync.WaitGroup
	all := append([]logger.Option{logger.WithWriter(buf), logger.WithFormat(logger.JSON)}, opts...)
	for r := range size {
		// Ranks build their loggers concurrently from the same options, as
		// in-process ranks do.
		wg.Go(func() {
			l, err := logger.New(r, size, all...)
			if !assert.NoError(t, err) {
				return
			}
			l.Zap().Debug("ranked debug")
			l.Zap().Info("ranked info")
			l.Local().Info("local info")
			assert.NoError(t, l.Close())
		})
	}
	wg.Wait()
	return buf.String()
}

// count returns, per rank, how many lines have message msg.
func count(lines []line, msg string) map[int]int {
	m := map[int]int{}
	for _, l := range lines {
		if l.Msg == msg {
			m[*l.Rank]++
		}
	}
	return m
}

func TestRootOnlyAcrossInProcessRanks(t *testing.T) {
	for size := 1; size <= 4; size++ {
		t.Run(fmt.Sprintf("size=%d", size), func(t *testing.T) {
			lines := parseJSON(t, logOnRanks(t, size, noEnv))
			assert.Equal(t, map[int]int{0: 1}, count(lines, "ranked info"), "only the root prints")
			assert.Empty(t, count(lines, "ranked debug"), "default level is info")
			want := map[int]int{}
			for r := range size {
				want[r] = 1
			}
			assert.Equal(t, want, count(lines, "local info"), "the local logger prints on every rank")
			for _, l := range lines {
				assert.Equal(t, "info", l.Level)
				assert.NotEmpty(t, l.Time)
			}
		})
	}
}

func TestRankSelection(t *testing.T) {
	const size = 4
	tests := []struct {
		name string
		opts []logger.Option
		want []int // ranks whose "ranked info" is printed
	}{
		{"default", []logger.Option{noEnv}, []int{0}},
		{"root 2", []logger.Option{noEnv, logger.WithRoot(2)}, []int{2}},
		{"all", []logger.Option{noEnv, logger.WithAllRanks()}, []int{0, 1, 2, 3}},
		{"list", []logger.Option{noEnv, logger.WithRanks(1, 3, 9)}, []int{1, 3}},
		{"none", []logger.Option{noEnv, logger.WithRanks()}, nil},
		{"env all", []logger.Option{env(map[string]string{logger.EnvRanks: "all"})}, []int{0, 1, 2, 3}},
		{"env root", []logger.Option{env(map[string]string{logger.EnvRanks: "root"})}, []int{0}},
		{"env list", []logger.Option{env(map[string]string{logger.EnvRanks: "1-2, 0"})}, []int{0, 1, 2}},
		{"env list beyond the job", []logger.Option{env(map[string]string{logger.EnvRanks: "3,9"})}, []int{3}},
		{"option beats env", []logger.Option{env(map[string]string{logger.EnvRanks: "all"}), logger.WithRootOnly()}, []int{0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lines := parseJSON(t, logOnRanks(t, size, tc.opts...))
			want := map[int]int{}
			for _, r := range tc.want {
				want[r] = 1
			}
			assert.Equal(t, want, count(lines, "ranked info"))
			assert.Len(t, count(lines, "local info"), size)
		})
	}
}

func TestLevels(t *testing.T) {
	tests := []struct {
		name       string
		opts       []logger.Option
		debug, any bool
	}{
		{"env debug", []logger.Option{env(map[string]string{logger.EnvLevel: "debug"})}, true, true},
		{"env DEBUG", []logger.Option{env(map[string]string{logger.EnvLevel: "DEBUG"})}, true, true},
		{"env warn", []logger.Option{env(map[string]string{logger.EnvLevel: "warn"})}, false, false},
		{"env off", []logger.Option{env(map[string]string{logger.EnvLevel: "off"})}, false, false},
		{"option off", []logger.Option{noEnv, logger.WithOff()}, false, false},
		{"option beats env", []logger.Option{env(map[string]string{logger.EnvLevel: "debug"}), logger.WithLevel(zapcore.InfoLevel)}, false, true},
		{"option debug", []logger.Option{noEnv, logger.WithLevel(zapcore.DebugLevel)}, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := logOnRanks(t, 2, tc.opts...)
			lines := parseJSON(t, out)
			assert.Equal(t, tc.debug, len(count(lines, "ranked debug")) > 0, out)
			assert.Equal(t, tc.any, len(lines) > 0, out)
		})
	}
}

func TestProcessEnvironment(t *testing.T) {
	t.Setenv(logger.EnvLevel, "debug")
	t.Setenv(logger.EnvRanks, "1")
	t.Setenv(logger.EnvFormat, "json")
	t.Setenv(logger.EnvFile, "")
	buf := &lockedbuf.Buffer{}
	l0, err := logger.New(0, 2, logger.WithWriter(buf))
	require.NoError(t, err)
	l1, err := logger.New(1, 2, logger.WithWriter(buf))
	require.NoError(t, err)
	l0.Zap().Debug("from 0")
	l1.Zap().Debug("from 1")
	lines := parseJSON(t, buf.String())
	require.Len(t, lines, 1)
	assert.Equal(t, "from 1", lines[0].Msg)
	assert.Equal(t, "debug", lines[0].Level)
	assert.False(t, l0.Prints())
	assert.True(t, l1.Prints())
}

func TestConsoleFormat(t *testing.T) {
	buf := &lockedbuf.Buffer{}
	l, err := logger.New(2, 3, noEnv, logger.WithWriter(buf), logger.WithRoot(2), logger.WithoutTime())
	require.NoError(t, err)
	l.Zap().Info("hello", zap.Int("n", 7))
	l.Local().Warn("careful")
	assert.Equal(t, "INFO\trank 2\thello\t{\"n\": 7}\nWARN\trank 2\tcareful\n", buf.String())

	buf2 := &lockedbuf.Buffer{}
	l, err = logger.New(0, 1, env(map[string]string{logger.EnvFormat: "console"}), logger.WithWriter(buf2))
	require.NoError(t, err)
	l.Zap().Info("timed")
	fields := strings.Split(strings.TrimSpace(buf2.String()), "\t")
	require.Len(t, fields, 4, buf2.String())
	assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d`, fields[0])
	assert.Equal(t, []string{"INFO", "rank 0", "timed"}, fields[1:])
}

func TestFilePerRank(t *testing.T) {
	dir := t.TempDir()
	pattern := filepath.Join(dir, "pz-{rank}.log")
	const size = 3
	var wg sync.WaitGroup
	for r := range size {
		l, err := logger.New(r, size, env(map[string]string{logger.EnvFile: pattern, logger.EnvRanks: "all", logger.EnvFormat: "json"}))
		require.NoError(t, err)
		wg.Go(func() {
			l.Zap().Info("to my file")
			assert.NoError(t, l.Close())
			assert.NoError(t, l.Close(), "Close is idempotent")
		})
	}
	wg.Wait()
	for r := range size {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("pz-%d.log", r)))
		require.NoError(t, err)
		lines := parseJSON(t, string(b))
		require.Len(t, lines, 1, "rank %d", r)
		assert.Equal(t, r, *lines[0].Rank)
		assert.Equal(t, "to my file", lines[0].Msg)
	}
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, ents, size)
}

func TestFileOpenError(t *testing.T) {
	_, err := logger.New(0, 1, noEnv, logger.WithFile(filepath.Join(t.TempDir(), "missing", "x-{rank}.log")))
	require.Error(t, err)
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), "x-0.log")
}

func TestObserverCore(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	for r := range 3 {
		l, err := logger.New(r, 3, noEnv, logger.WithCore(core))
		require.NoError(t, err)
		l.Zap().Info("ranked")
		l.Local().Debug("local")
	}
	ranked := logs.FilterMessage("ranked").All()
	require.Len(t, ranked, 1)
	assert.Equal(t, int64(0), ranked[0].ContextMap()["rank"])
	local := logs.FilterMessage("local").All()
	require.Len(t, local, 3)
	for i, e := range local {
		assert.Equal(t, int64(i), e.ContextMap()["rank"], "entry %d", i)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name       string
		rank, size int
		opts       []logger.Option
		mention    string
	}{
		{"rank out of range", 3, 3, []logger.Option{noEnv}, "rank 3 of size 3"},
		{"size zero", 0, 0, []logger.Option{noEnv}, "size 0"},
		{"root out of range", 0, 2, []logger.Option{noEnv, logger.WithRoot(2)}, "root 2"},
		{"bad level", 0, 1, []logger.Option{env(map[string]string{logger.EnvLevel: "loud"})}, "PZ_LOG=\"loud\""},
		{"bad ranks", 0, 1, []logger.Option{env(map[string]string{logger.EnvRanks: "3-1"})}, "PZ_LOG_RANKS"},
		{"bad format", 0, 1, []logger.Option{env(map[string]string{logger.EnvFormat: "xml"})}, "PZ_LOG_FORMAT"},
		{"ranks none of which exists", 0, 2, []logger.Option{env(map[string]string{logger.EnvRanks: "5,7-9"})}, `PZ_LOG_RANKS="5,7-9" names no rank of this job of 2 (ranks 0-1)`},
		{"bad format option", 0, 1, []logger.Option{noEnv, logger.WithFormat(logger.Format(9))}, "Format(9)"},
		// Found in the new-user trial: WithRanks(3) in a job of 3 (meaning
		// the last rank) silenced every rank, where PZ_LOG_RANKS=3 is refused.
		{"option ranks none of which exists", 1, 3, []logger.Option{noEnv, logger.WithRanks(5, 3)}, "WithRanks[3 5] names no rank of this job of 3 (ranks 0-2)"},
		{"negative rank option", 1, 3, []logger.Option{noEnv, logger.WithRanks(2, -1)}, "WithRanks[-1 2]: rank -1 is negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := logger.New(tc.rank, tc.size, tc.opts...)
			require.ErrorIs(t, err, logger.ErrConfig)
			assert.Contains(t, err.Error(), tc.mention)
		})
	}
}

func TestParseRanks(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		ok   bool
	}{
		{"0", []int{0}, true},
		{"3,1,2", []int{1, 2, 3}, true},
		{"0-3,2,7", []int{0, 1, 2, 3, 7}, true},
		{" 4 - 5 ", []int{4, 5}, true},
		{"", nil, false},
		{"-1", nil, false},
		{"2-1", nil, false},
		{"a", nil, false},
		{"1,", nil, false},
	}
	for _, tc := range tests {
		got, err := logger.ParseRanks(tc.in)
		if !tc.ok {
			assert.ErrorIs(t, err, logger.ErrConfig, "%q", tc.in)
			continue
		}
		require.NoError(t, err, "%q", tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
	}
}

// TestEnvRanksWideRange: PZ_LOG_RANKS with a wide range (a typo such as
// 0-20000000 for 0-2, or an open-ended 4-99999999999) made New expand it
// into one int per rank, on every rank: 0-2000000000 took a minute and
// 24 GB before the kernel killed the process, and an upper bound of
// math.MaxInt looped for ever (r <= MaxInt always holds). New now keeps
// the ranges as ranges: it allocates as much for 0-20000000 as for 0-2,
// and a bound of MaxInt is a range like any other. ParseRanks, which must
// return every rank, refuses more than MaxParsedRanks of them.
func TestEnvRanksWideRange(t *testing.T) {
	env := func(v string) logger.Option {
		return logger.WithEnv(func(k string) (string, bool) {
			if k == logger.EnvRanks {
				return v, true
			}
			return "", false
		})
	}
	newWith := func(rank int, v string) (*logger.Logger, error) {
		return logger.New(rank, 3, env(v), logger.WithWriter(&bytes.Buffer{}))
	}
	allocs := func(v string) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		l, err := newWith(0, v)
		runtime.ReadMemStats(&after)
		require.NoError(t, err, v)
		require.True(t, l.Prints(), v)
		return after.TotalAlloc - before.TotalAlloc
	}
	narrow, wide := allocs("0-2"), allocs("0-20000000")
	assert.Less(t, wide, narrow+1<<20, "PZ_LOG_RANKS=0-20000000 allocated %d bytes, 0-2 %d", wide, narrow)

	for _, v := range []string{"1-" + strconv.Itoa(math.MaxInt), "5,1-" + strconv.Itoa(math.MaxInt)} {
		l, err := newWith(2, v)
		require.NoError(t, err, v)
		assert.True(t, l.Prints(), "%s: rank 2 prints", v)
		l, err = newWith(0, v)
		require.NoError(t, err, v)
		assert.False(t, l.Prints(), "%s: rank 0 does not", v)
	}
	_, err := newWith(0, "3-"+strconv.Itoa(math.MaxInt))
	require.ErrorIs(t, err, logger.ErrConfig)
	assert.Contains(t, err.Error(), "names no rank of this job of 3")
	_, err = newWith(0, "2-1")
	require.ErrorIs(t, err, logger.ErrConfig)
	assert.Contains(t, err.Error(), `bad range "2-1"`, "the list's own error is kept")

	_, err = logger.ParseRanks("0-" + strconv.Itoa(math.MaxInt))
	require.ErrorIs(t, err, logger.ErrConfig)
	assert.Contains(t, err.Error(), "more than")
	got, err := logger.ParseRanks(strconv.Itoa(math.MaxInt))
	require.NoError(t, err)
	assert.Equal(t, []int{math.MaxInt}, got)
	got, err = logger.ParseRanks(fmt.Sprintf("0-%d", logger.MaxParsedRanks-1))
	require.NoError(t, err)
	assert.Len(t, got, logger.MaxParsedRanks)
}

func TestFormatString(t *testing.T) {
	assert.Equal(t, "console", logger.Console.String())
	assert.Equal(t, "json", logger.JSON.String())
}

// A log file that cannot be opened (found in the new-user trial: a
// PZ_LOG_FILE in a directory not yet made) says which file, where its name
// came from, why and what to do, not just the bare open error.
func TestFileOpenErrorSaysTheFix(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "out", "logs")
	plain := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(plain, nil, 0o644))
	tests := []struct {
		name    string
		opt     logger.Option
		is      error
		mention []string
	}{
		{"missing directory, option", logger.WithFile(filepath.Join(missing, "pz-{rank}.log")), os.ErrNotExist,
			[]string{filepath.Join(missing, "pz-1.log"), fmt.Sprintf("WithFile(%q)", filepath.Join(missing, "pz-{rank}.log")), "directory " + missing + " does not exist", "mkdir -p " + missing}},
		{"missing directory, environment", env(map[string]string{logger.EnvFile: filepath.Join(missing, "run-{rank}.log")}), os.ErrNotExist,
			[]string{fmt.Sprintf("PZ_LOG_FILE=%q", filepath.Join(missing, "run-{rank}.log")), "does not exist", "mkdir -p"}},
		{"a directory", logger.WithFile(dir), nil,
			[]string{"it is a directory", filepath.Join(dir, "pz-{rank}.log")}},
		{"under a file", logger.WithFile(filepath.Join(plain, "x.log")), nil,
			[]string{"is a file, not a directory"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := logger.New(1, 2, noEnv, tc.opt)
			require.Error(t, err)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			assert.Contains(t, err.Error(), "rank 1")
			for _, m := range tc.mention {
				assert.Contains(t, err.Error(), m)
			}
		})
	}
}

// A line logged after Close (a finalizer of another layer, a goroutine
// still running; found in the new-user trial) was lost: the file was
// closed and zap printed only "write error: ... file already closed".
// It now goes to standard error after a note naming the file.
func TestLogAfterCloseIsNotLost(t *testing.T) {
	dir := t.TempDir()
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	require.NoError(t, err)
	saved := os.Stderr
	os.Stderr = stderr
	t.Cleanup(func() { os.Stderr = saved; stderr.Close() })

	name := filepath.Join(dir, "pz-0.log")
	l, err := logger.New(0, 1, noEnv, logger.WithFile(name), logger.WithoutTime())
	require.NoError(t, err)
	l.Zap().Info("before close")
	require.NoError(t, l.Close())
	l.Zap().Info("after close")
	l.Local().Info("and again")
	assert.NoError(t, l.Sync(), "nothing to flush after Close")
	assert.NoError(t, l.Close())

	b, err := os.ReadFile(name)
	require.NoError(t, err)
	assert.Equal(t, "INFO\trank 0\tbefore close\n", string(b))
	b, err = os.ReadFile(stderr.Name())
	require.NoError(t, err)
	out := string(b)
	assert.Contains(t, out, "INFO\trank 0\tafter close\n")
	assert.Contains(t, out, "INFO\trank 0\tand again\n")
	assert.Equal(t, 1, strings.Count(out, "after Logger.Close closed the log file "+name), "one note: %s", out)
}

// TestLevelNamesListed: the names PZ_LOG accepts are the names its error
// lists (fatal, panic, dpanic, warning and none were accepted and not
// listed), and each sets the level it names.
func TestLevelNamesListed(t *testing.T) {
	_, err := logger.New(0, 1, env(map[string]string{logger.EnvLevel: "loud"}))
	require.ErrorIs(t, err, logger.ErrConfig)
	msg := err.Error()
	for _, tc := range []struct {
		name           string
		debug, info    bool
		warn, anything bool
	}{
		{"debug", true, true, true, true},
		{"info", false, true, true, true},
		{"warn", false, false, true, true},
		{"warning", false, false, true, true},
		{"error", false, false, false, true},
		{"dpanic", false, false, false, false},
		{"panic", false, false, false, false},
		{"fatal", false, false, false, false},
		{"off", false, false, false, false},
		{"none", false, false, false, false},
	} {
		assert.Contains(t, msg, tc.name, "the message lists %s", tc.name)
		l, err := logger.New(0, 1, env(map[string]string{logger.EnvLevel: strings.ToUpper(tc.name)}))
		require.NoError(t, err, tc.name)
		core := l.Zap().Core()
		assert.Equal(t, tc.debug, core.Enabled(zapcore.DebugLevel), tc.name)
		assert.Equal(t, tc.info, core.Enabled(zapcore.InfoLevel), tc.name)
		assert.Equal(t, tc.warn, core.Enabled(zapcore.WarnLevel), tc.name)
		assert.Equal(t, tc.anything, core.Enabled(zapcore.ErrorLevel), tc.name)
		require.NoError(t, l.Close())
	}
	for _, bad := range []string{"trace", "verbose", "critical", "warn,error"} {
		_, err := logger.New(0, 1, env(map[string]string{logger.EnvLevel: bad}))
		assert.ErrorIs(t, err, logger.ErrConfig, bad)
	}
}
