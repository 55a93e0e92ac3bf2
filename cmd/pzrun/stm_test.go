package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pzgo/pz/scheduler/static"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const pipelineYAML = `hyperepochs:
  - name: main
    period: 10ms
    resources: [cpu0, cpu1, gpu0.stream0]
    epochs:
      - name: frame
clients: [camera, planner]
runnables:
  - {name: grab,   client: camera,  resource: cpu0, wcet: 1ms}
  - {name: detect, client: camera,  resource: gpu0.stream0, wcet: 3ms, submitter: detect_submit}
  - {name: detect_submit, client: camera, resource: cpu1, wcet: 100us, deps: [grab]}
  - {name: plan,   client: planner, resource: cpu0, wcet: 2ms, deps: [detect]}
`

func writeSchedule(t *testing.T, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pipeline.yaml")
	require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
	return path
}

func wellFormedXML(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	dec := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return
		}
		require.NoError(t, err, path)
	}
}

func TestSTMCompile(t *testing.T) {
	src := writeSchedule(t, pipelineYAML)
	svg := filepath.Join(t.TempDir(), "plan.svg")
	// Flags after the schedule, as people type them.
	code, out, errs := pzrun(t, "stm", "compile", src, "-svg", svg)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "detect (submitted by detect_submit)")
	assert.Contains(t, out, "hyperepoch main: period 10ms")
	plan := strings.TrimSuffix(src, ".yaml") + ".stm"
	assert.Contains(t, errs, "wrote "+plan)
	assert.Contains(t, errs, "drew the timeline in "+svg)
	f, err := os.Open(plan)
	require.NoError(t, err)
	defer f.Close()
	p, err := static.ReadPlan(f)
	require.NoError(t, err)
	assert.Len(t, p.Runnables(), 4)
	wellFormedXML(t, svg)
}

func TestSTMCompileErrors(t *testing.T) {
	src := writeSchedule(t, strings.Replace(pipelineYAML, "deps: [detect]", "deps: [detekt]", 1))
	code, _, errs := pzrun(t, "stm", "compile", src)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, `pipeline.yaml:12: runnable "plan" depends on "detekt", which is not a runnable; did you mean "detect"?`)
	assert.Contains(t, errs, "1 problem(s)")

	for _, args := range [][]string{
		{"stm"},
		{"stm", "nope"},
		{"stm", "compile"},
		{"stm", "compile", "a.yaml", "b.yaml"},
		{"stm", "client", src},
		{"-n", "2", "stm", "compile", src},
		{"stm", "bench", "-frames", "0"},
		{"stm", "run", src, "-frames", "-1"},
		{"stm", "master", src, "-frames", "-1"},
		{"stm", "run", src, "-liveness", "-1s"},
		{"stm", "run", src, "-nope"},
	} {
		code, _, errs := pzrun(t, args...)
		assert.Equal(t, 2, code, "%q: %s", args, errs)
	}
	code, _, errs = pzrun(t, "stm", "run", src, "-frames", "-1")
	assert.Equal(t, "pzrun stm run: -frames -1: want a number of periods >= 0 (0: until SIGINT/SIGTERM)\n", errs)
	// A record that cannot be written is found before the run (the run
	// was lost after it), and no file is left behind by the probe.
	missing := filepath.Join(t.TempDir(), "no-such-dir", "run.json")
	for _, cmd := range []string{"run", "master"} {
		code, out, errs := pzrun(t, "stm", cmd, src, "-frames", "1000000", "-o", missing)
		assert.Equal(t, 2, code, "%s: %s", cmd, errs)
		assert.Empty(t, out, cmd)
		assert.Contains(t, errs, "pzrun stm "+cmd+": -o "+missing+": open "+missing+": no such file or directory", cmd)
	}
	probe := filepath.Join(t.TempDir(), "new.json")
	require.NoError(t, checkWritable(probe))
	assert.NoFileExists(t, probe, "the probe removes a file it created")
	// A duration without its unit: the flag package says "parse error".
	code, _, errs = pzrun(t, "stm", "run", src, "-liveness", "1")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, `invalid value "1" for flag -liveness: parse error (a duration with its unit: 1s, 500ms, 2m)`)
	code, _, errs = pzrun(t, "-comm-timeout", "5", "hello")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "(a duration with its unit: 1s, 500ms, 2m)")
	code, out, errs := pzrun(t, "stm", "run", "-nope")
	assert.Equal(t, 2, code)
	assert.Empty(t, out)
	assert.True(t, strings.HasPrefix(errs, "pzrun stm run: flag provided but not defined: -nope\nusage: pzrun stm run PLAN"), errs)
	assert.Equal(t, 1, strings.Count(errs, "-nope"), "said once: %s", errs)
}

func TestSTMRunAndAnalyze(t *testing.T) {
	src := writeSchedule(t, pipelineYAML)
	dir := t.TempDir()
	runPath := filepath.Join(dir, "run.json")
	code, out, errs := pzrun(t, "stm", "run", src, "-frames", "20", "-o", runPath, "-load", "0.2", "-liveness", "10s")
	require.Equal(t, 0, code, errs)
	for _, r := range []string{"grab", "detect_submit", "detect", "plan"} {
		assert.Contains(t, out, r)
	}
	assert.Contains(t, out, "20 periods")

	svg, trace := filepath.Join(dir, "run.svg"), filepath.Join(dir, "run.trace.json")
	code, out, errs = pzrun(t, "stm", "analyze", runPath, "-json", "-svg", svg, "-trace", trace)
	require.Equal(t, 0, code, errs)
	// Where it drew, on stderr (stdout is -json's), as compile -svg says.
	assert.Contains(t, errs, "drew the planned and actual timelines of 3 periods in "+svg)
	assert.Contains(t, errs, "wrote the run's trace (Perfetto) in "+trace)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 5)
	for _, l := range lines[:4] {
		var s struct {
			Type    string `json:"type"`
			Name    string `json:"name"`
			Runs    int    `json:"runs"`
			Skipped int    `json:"skipped"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &s))
		assert.Equal(t, "runnable", s.Type)
		assert.Equal(t, 20, s.Runs+s.Skipped, s.Name)
	}
	var sum map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[4]), &sum))
	assert.Equal(t, "summary", sum["type"])
	assert.EqualValues(t, 20, sum["periods"])
	wellFormedXML(t, svg)
	var tr struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	b, err := os.ReadFile(trace)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &tr))
	assert.NotEmpty(t, tr.TraceEvents)
}

// pzrun's ranks as clients: two in-process ranks share the two clients.
func TestSTMRanksAsClients(t *testing.T) {
	src := writeSchedule(t, pipelineYAML)
	code, out, errs := pzrun(t, "-n", "2", "stm", "run", src, "-frames", "10", "-liveness", "10s")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "10 periods")
	code, _, errs = pzrun(t, "-n", "3", "stm", "run", src, "-frames", "10")
	assert.Equal(t, 2, code)
	assert.Equal(t, "pzrun stm run: 3 ranks for 2 clients: use at most 2 ranks\n", errs, "once, not once per rank")
}

// lines collects a process's output.
type lines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lines) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s + "\n")
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startLogged starts cmd and returns a channel closed when a line of
// its stderr contains want.
func startLogged(t *testing.T, cmd *exec.Cmd, want string, errb *lines) (seen, eof <-chan struct{}) {
	t.Helper()
	pipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	seenc, eofc := make(chan struct{}), make(chan struct{})
	seen, eof = seenc, eofc
	go func() {
		defer close(eofc)
		sc := bufio.NewScanner(pipe)
		closed := false
		for sc.Scan() {
			errb.add(sc.Text())
			if !closed && strings.Contains(sc.Text(), want) {
				close(seenc)
				closed = true
			}
		}
	}()
	return seen, eof
}

// Master and clients as separate processes: the clients start first,
// the master's SIGINT ends every process at a period boundary.
func TestSTMProcessesMasterSIGINT(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pzrun")
	}
	bin := buildPzrun(t)
	src := writeSchedule(t, pipelineYAML)
	dir := filepath.Join(t.TempDir(), "sock")
	runPath := filepath.Join(t.TempDir(), "run.json")
	var clients []*exec.Cmd
	for _, name := range []string{"planner", "camera"} {
		c := exec.Command(bin, "stm", "client", src, name, "-dir", dir)
		c.Stderr = os.Stderr
		require.NoError(t, c.Start())
		clients = append(clients, c)
		t.Cleanup(func() { c.Process.Kill() })
	}
	master := exec.Command(bin, "stm", "master", src, "-dir", dir, "-o", runPath, "-liveness", "10s")
	var merr lines
	started, eof := startLogged(t, master, "every client is in", &merr)
	t.Cleanup(func() { master.Process.Kill() })
	select {
	case <-started:
	case <-time.After(60 * time.Second):
		t.Fatalf("the master never started the run: %s", merr.String())
	}
	require.NoError(t, master.Process.Signal(syscall.SIGINT))
	// pzrun stopped by a signal exits with 128+signo, after a graceful
	// stop.
	<-eof // the whole of its stderr, then its status
	var ee *exec.ExitError
	require.ErrorAs(t, master.Wait(), &ee, merr.String())
	assert.Equal(t, 128+int(syscall.SIGINT), ee.ExitCode(), merr.String())
	for _, c := range clients {
		assert.NoError(t, c.Wait())
	}
	f, err := os.Open(runPath)
	require.NoError(t, err)
	defer f.Close()
	run, err := static.ReadRun(f)
	require.NoError(t, err)
	assert.Contains(t, run.Stopped, "the master was stopped")
	// Every runnable reached the same period: the frames it recorded and
	// those a client far behind the plan abandoned (none, unless the
	// machine is very loaded) come to the same count.
	n := len(run.Runnables[0].Seq) + int(run.Runnables[0].Abandoned)
	for _, rr := range run.Runnables {
		assert.Equal(t, n, len(rr.Seq)+int(rr.Abandoned), rr.Name)
	}
}

func TestSTMBench(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pzrun and starts processes")
	}
	bin := buildPzrun(t)
	cmd := exec.Command(bin, "stm", "bench", "-frames", "300", "-json")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	require.NoError(t, err, errb.String())
	var res benchResult
	require.NoError(t, json.Unmarshal(out, &res))
	assert.Equal(t, "stm-bench", res.Type)
	assert.Equal(t, 300, res.Periods)
	assert.Equal(t, 16, res.Runnables)
	assert.Equal(t, 4, res.Clients)
	assert.Positive(t, res.JitterP99)
	if _, err := exec.LookPath("cyclictest"); err == nil {
		assert.Positive(t, res.CyclictestP99)
	}
}

// stm bench's overruns_late_start and the analysis' started_late (pzrun
// stm analyze of the bench's record) are one count: the bench counted
// the overruns whose body stayed within its WCET, the analysis the
// deadline overruns that, started on time, would have been met, and a
// run whose bodies all ran long got 0 from the bench and hundreds from
// the analysis. The schedule is built to start late: one core's chain of
// four runnables, each body 3 times its WCET (1.5 slots of 1), so the
// third and fourth miss their deadlines (planned end + slack, 2 slots
// after the planned end) by waiting for the first two, and every frame
// after the first starts behind the one before.
func TestSTMBenchLateStartsAreTheAnalysis(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pzrun and starts processes")
	}
	bin := buildPzrun(t)
	rec := filepath.Join(t.TempDir(), "run.json")
	cmd := exec.Command(bin, "stm", "bench", "-frames", "60", "-period", "2ms", "-clients", "2", "-per-client", "2", "-cores", "1",
		"-load", "3", "-o", rec, "-json")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	require.NoError(t, err, errb.String())
	var res benchResult
	require.NoError(t, json.Unmarshal(out, &res), string(out))

	f, err := os.Open(rec)
	require.NoError(t, err)
	defer f.Close()
	run, err := static.ReadRun(f)
	require.NoError(t, err)
	a := static.Analyze(run)
	require.Positive(t, a.StartedLate, "the schedule is built to start late")
	assert.Equal(t, a.StartedLate, res.OverrunsLateStart)

	// And pzrun stm analyze -json of the record says the same.
	aout, err := exec.Command(bin, "stm", "analyze", rec, "-json").Output()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(aout)), "\n")
	var sum struct {
		Type        string `json:"type"`
		StartedLate int    `json:"started_late"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &sum))
	assert.Equal(t, "summary", sum.Type)
	assert.Equal(t, res.OverrunsLateStart, sum.StartedLate)
}

func TestParseCyclictest(t *testing.T) {
	out := "000000 000000\n000010 000090\n000050 000009\n000120 000001\n# Total: 000000100\n# Min Latencies: 00010\n# Max Latencies: 00120\n# Histogram Overflows: 00000\n"
	p99, mx, err := parseCyclictest([]byte(out))
	require.NoError(t, err)
	assert.EqualValues(t, 50_000, p99)
	assert.EqualValues(t, 120_000, mx)
	// Overflows beyond the 99th percentile's rank give the maximum.
	out = "000010 000090\n# Max Latencies: 03000\n# Histogram Overflows: 00010\n"
	p99, mx, err = parseCyclictest([]byte(out))
	require.NoError(t, err)
	assert.EqualValues(t, 3_000_000, p99)
	assert.EqualValues(t, 3_000_000, mx)
	_, _, err = parseCyclictest([]byte("nothing"))
	assert.Error(t, err)
}

// stm run shows the clients' warnings, as stm client does: here the
// thread of a core this machine lacks runs unpinned.
func TestSTMRunShowsClientWarnings(t *testing.T) {
	src := writeSchedule(t, `hyperepochs:
  - {name: h, period: 5ms, resources: [cpu0, cpu4095], epochs: [{name: f}]}
clients: [a, b]
runnables:
  - {name: x, client: a, resource: cpu4095, wcet: 500us}
  - {name: y, client: b, resource: cpu0, wcet: 500us}
`)
	for _, args := range [][]string{{"stm", "run"}, {"-n", "2", "stm", "run"}} {
		code, _, errs := pzrun(t, append(args, src, "-frames", "2", "-load", "0.1", "-liveness", "10s")...)
		require.Equal(t, 0, code, errs)
		assert.Contains(t, errs, "a: cpu4095 runs unpinned: ", "%v", args)
	}
}

// A SIGINT to pzrun stm run stops the run at a period boundary; pzrun
// exits 130 and the record names pzrun's signal, as for stm master
// (RunLocal's own handler raced pzrun's for the reason before).
func TestSTMRunSIGINT(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pzrun")
	}
	bin := buildPzrun(t)
	src := writeSchedule(t, pipelineYAML)
	runPath := filepath.Join(t.TempDir(), "run.json")
	for i := range 3 { // the reason raced: look more than once
		cmd := exec.Command(bin, "stm", "run", src, "-o", runPath, "-liveness", "10s")
		var errb lines
		started, eof := startLogged(t, cmd, "every client is in", &errb)
		t.Cleanup(func() { cmd.Process.Kill() })
		select {
		case <-started:
		case <-time.After(60 * time.Second):
			t.Fatalf("the run never started: %s", errb.String())
		}
		time.Sleep(100 * time.Millisecond) // into the loop
		require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		<-eof
		var ee *exec.ExitError
		require.ErrorAs(t, cmd.Wait(), &ee, errb.String())
		assert.Equal(t, 128+int(syscall.SIGINT), ee.ExitCode(), errb.String())
		f, err := os.Open(runPath)
		require.NoError(t, err)
		run, err := static.ReadRun(f)
		f.Close()
		require.NoError(t, err)
		assert.Equal(t, "the master was stopped (pzrun: interrupt received)", run.Stopped, "try %d", i)
	}
}

// stm analyze: -periods below 1 is a usage error; a plan or a schedule
// given for a run record is named as such.
func TestSTMAnalyzeBadInput(t *testing.T) {
	src := writeSchedule(t, pipelineYAML)
	plan := filepath.Join(t.TempDir(), "p.stm")
	code, _, errs := pzrun(t, "stm", "compile", src, "-o", plan, "-q")
	require.Equal(t, 0, code, errs)
	for _, p := range []string{"0", "-3"} {
		code, _, errs := pzrun(t, "stm", "analyze", plan, "-periods", p)
		assert.Equal(t, 2, code, errs)
		assert.Contains(t, errs, "-periods "+p+": want at least 1 period to draw")
	}
	code, _, errs = pzrun(t, "stm", "analyze", plan)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "this is a compiled plan (format pz-stm), not a run record")
	// A schedule: it said "invalid character '#' looking for beginning
	// of value".
	code, _, errs = pzrun(t, "stm", "analyze", src)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "this is a schedule (YAML), not a run record: run it first (pzrun stm run SCHEDULE.yaml -o RUN.json")
	assert.NotContains(t, errs, "invalid character")
}

// benchClientPid returns the pid of stm bench's client process name, a
// child of pid.
func benchClientPid(t *testing.T, pid int, name string) int {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	require.NoError(t, err)
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(b)) {
			cmdline, _ := os.ReadFile("/proc/" + c + "/cmdline")
			args := strings.Split(string(cmdline), "\x00")
			if slices.Contains(args, "client") && slices.Contains(args, name) {
				n, err := strconv.Atoi(c)
				require.NoError(t, err)
				return n
			}
		}
	}
	t.Fatalf("no client process %s among pzrun's children", name)
	return 0
}

// A Ctrl-C (SIGINT to pzrun's process group) of pzrun stm bench while a
// client lags far behind the plan (here stopped with SIGSTOP, as an
// overloaded machine would hold it) ends the run within about a period
// of that client's position once it runs again: it abandons its backlog
// instead of running every period up to the master's boundary (which
// took it past the liveness bound under go test -race, and the master
// blamed it). pzrun exits 130, no client is blamed, and the record says
// the interrupt and shows the lagging client's last period, far before
// the others'. A light schedule: 2 clients, the second's runnables
// waiting for the first's, so that the first runs ahead.
func TestSTMBenchSIGINTWhileAClientLags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pzrun")
	}
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("needs /proc to find the client processes")
	}
	bin := buildPzrun(t)
	runPath := filepath.Join(t.TempDir(), "run.json")
	cmd := exec.Command(bin, "stm", "bench", "-frames", "1000000", "-period", "2ms", "-clients", "2", "-per-client", "2",
		"-load", "0.05", "-spin", "0s", "-liveness", "10m", "-o", runPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // as a shell's job
	var stdout strings.Builder
	cmd.Stdout = &stdout
	pipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	var errb lines
	stderrLines := make(chan string, 1024)
	go func() {
		defer close(stderrLines)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			errb.add(sc.Text())
			select {
			case stderrLines <- sc.Text():
			default: // nobody waits for it
			}
		}
	}()
	// waitLine returns the first line of pzrun's stderr from now on that
	// starts with prefix.
	waitLine := func(prefix string) string {
		t.Helper()
		for l := range stderrLines {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		t.Fatalf("pzrun ended before saying %q: %s", prefix, errb.String())
		return ""
	}
	// Once every client is set up (ready): a client stopped in its
	// setup holds the first period back, up to the setup bound.
	waitLine("master: every client is set up")
	lagging := benchClientPid(t, cmd.Process.Pid, "c1")
	require.NoError(t, syscall.Kill(lagging, syscall.SIGSTOP))
	t.Cleanup(func() { syscall.Kill(lagging, syscall.SIGCONT) })
	// The master's progress line, 5 s in: c0 has run as many periods.
	var at int
	_, err = fmt.Sscanf(waitLine("master: period "), "master: period %d", &at)
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGINT))
	waitLine("master: stopping")
	require.NoError(t, syscall.Kill(lagging, syscall.SIGCONT))
	for range stderrLines { // the rest of its stderr, then its status
	}
	var ee *exec.ExitError
	require.ErrorAs(t, cmd.Wait(), &ee, errb.String())
	assert.Equal(t, 130, ee.ExitCode(), errb.String())
	assert.NotRegexp(t, `client c\d: |disconnected|stopped answering`, errb.String(), "no client is blamed")
	assert.Contains(t, stdout.String(), "start jitter p50 ")
	f, err := os.Open(runPath)
	require.NoError(t, err)
	defer f.Close()
	run, err := static.ReadRun(f)
	require.NoError(t, err)
	assert.Equal(t, "the master was stopped (pzrun: interrupt received)", run.Stopped)
	for _, rr := range run.Runnables {
		last := int64(-1) // c1 may have been stopped before its first period
		if len(rr.Seq) > 0 {
			last = rr.Seq[len(rr.Seq)-1]
		}
		if rr.Client == "c1" {
			assert.Less(t, last, int64(at/2), "%s: the lagging client abandoned its backlog (the master was at period %d)", rr.Name, at)
			assert.GreaterOrEqual(t, last+rr.Abandoned, int64(at), "%s: the record counts the frames it abandoned, up to the stop's period", rr.Name)
		} else {
			assert.GreaterOrEqual(t, last, int64(at), "%s ran ahead", rr.Name)
			assert.Zero(t, rr.Abandoned, rr.Name)
		}
	}
	assert.Contains(t, stdout.String(), "frames abandoned after the stop by clients far behind the plan: ", "the summary counts the frames given up")
}

// stm client's -master-timeout: a negative duration is a usage error
// that names the flag and says what 0 means.
func TestSTMClientMasterTimeoutFlag(t *testing.T) {
	src := writeSchedule(t, pipelineYAML)
	code, _, errs := pzrun(t, "stm", "client", src, "camera", "-master-timeout", "-1s")
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, "-master-timeout -1s: want a duration >= 0 (0: the master's -liveness bound)")
}

// stm run and stm bench take -master-timeout too (their clients'
// static.WithMasterTimeout), as stm client does: listed by -h, and a
// negative duration is a usage error, found before anything runs.
func TestSTMRunBenchMasterTimeoutFlag(t *testing.T) {
	src := writeSchedule(t, pipelineYAML)
	for _, args := range [][]string{
		{"stm", "run", src, "-master-timeout", "-1s"},
		{"stm", "bench", "-master-timeout", "-1s"},
	} {
		code, _, errs := pzrun(t, args...)
		assert.Equal(t, 2, code, "%v: %s", args, errs)
		assert.Contains(t, errs, "-master-timeout -1s: want a duration >= 0 (0: the master's -liveness bound)", "%v", args)
		code, out, errs := pzrun(t, args[0], args[1], "-h")
		assert.Equal(t, 0, code, "%v -h: %s", args, errs)
		assert.Contains(t, out, "-master-timeout D", "%v -h", args)
	}
}

// stm bench takes flags only: its usage line said `usage: pzrun stm
// bench ` (no [flags]) and an argument got `want , got 1 argument(s)`.
// Found in the stm user trial.
func TestSTMBenchTakesFlagsOnly(t *testing.T) {
	code, out, errs := pzrun(t, "stm", "bench", "-h")
	assert.Equal(t, 0, code, errs)
	assert.Contains(t, out, "usage: pzrun stm bench [flags]\n")
	code, _, errs = pzrun(t, "stm", "bench", "foo")
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, `pzrun stm bench: it takes flags only, got 1 argument(s) ["foo"] (pzrun stm bench -h lists the flags)`)
}

// stm client with a misspelt client name is a usage error that names
// the client meant and lists the plan's clients, before anything runs.
func TestSTMClientMisspeltName(t *testing.T) {
	src := writeSchedule(t, pipelineYAML)
	code, _, errs := pzrun(t, "stm", "client", src, "camra")
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, `the plan has no client "camra"; its clients are `)
	assert.Contains(t, errs, `; did you mean "camera"?`)
}

// stm master, run and bench take -setup-timeout (the master's
// static.WithSetupTimeout): listed by -h; a negative duration or one
// without a unit is a usage error naming the flag, found before
// anything runs.
func TestSTMSetupTimeoutFlag(t *testing.T) {
	src := writeSchedule(t, pipelineYAML)
	for _, cmd := range [][]string{
		{"stm", "master", src},
		{"stm", "run", src},
		{"stm", "bench"},
	} {
		args := append(slices.Clone(cmd), "-setup-timeout", "-1s")
		code, _, errs := pzrun(t, args...)
		assert.Equal(t, 2, code, "%v: %s", args, errs)
		assert.Contains(t, errs, "-setup-timeout -1s: want a duration >= 0 (0: 10s; at least the -liveness bound is used)", "%v", args)
		args = append(slices.Clone(cmd), "-setup-timeout", "5")
		code, _, errs = pzrun(t, args...)
		assert.Equal(t, 2, code, "%v: %s", args, errs)
		assert.Contains(t, errs, `invalid value "5" for flag -setup-timeout`, "%v", args)
		code, out, errs := pzrun(t, cmd[0], cmd[1], "-h")
		assert.Equal(t, 0, code, "%v -h: %s", cmd, errs)
		assert.Contains(t, out, "-setup-timeout D", "%v -h", cmd)
	}
}
