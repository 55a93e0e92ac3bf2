package benchtasks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pzgo/pz/scheduler"
)

// The OpenMP peer builds with the system compiler and reports a sane µs
// per task for every case and team size. Without cc the test is skipped
// (TestRunOpenMPNoCompiler covers that path).
func TestRunOpenMP(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles and runs the OpenMP peer")
	}
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skipf("no C compiler: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var log bytes.Buffer
	p, err := RunOpenMP(ctx, OpenMPConfig{Workers: []int{2, 1}, Cases: []Case{CaseIndep, CaseChain, CaseHandles4, CaseGrain},
		Tasks: 2000, Rounds: 3, Log: &log})
	require.NoError(t, err, log.String())
	require.Len(t, p, 6, "3 cases x 2 team sizes, no grain: %v", p)
	for _, w := range []int{2, 1} {
		for _, c := range OpenMPCases() {
			name := OpenMPName(c, w)
			v, ok := p[name]
			require.True(t, ok, "%s missing from %v", name, p)
			assert.Equal(t, "us/task", v.Unit, name)
			// Sane: above zero, and far below a millisecond per empty
			// task even on a loaded machine.
			assert.Greater(t, v.Value, 0.0, name)
			assert.Less(t, v.Value, 1000.0, name)
		}
	}
	assert.Contains(t, log.String(), "-fopenmp")
	assert.Contains(t, log.String(), "OMP_NUM_THREADS=1 omp_tasks -m handles4 -n 2000 -r 3")
}

// A missing compiler, or one that cannot build OpenMP code, is reported
// as ErrNoOpenMP with the reason, not a crash.
func TestRunOpenMPNoCompiler(t *testing.T) {
	ctx := context.Background()
	_, err := RunOpenMP(ctx, OpenMPConfig{CC: "/nonexistent/cc", Workers: []int{1}})
	require.ErrorIs(t, err, ErrNoOpenMP)
	assert.Contains(t, err.Error(), "/nonexistent/cc")

	if _, lerr := exec.LookPath("false"); lerr == nil {
		// A "compiler" that always fails stands for one without OpenMP.
		_, err = RunOpenMP(ctx, OpenMPConfig{CC: "false", Workers: []int{1}})
		require.ErrorIs(t, err, ErrNoOpenMP)
		assert.Contains(t, err.Error(), "false -O2 -fopenmp failed")
	}

	// Nothing to measure: no compiler needed.
	p, err := RunOpenMP(ctx, OpenMPConfig{CC: "/nonexistent/cc", Cases: []Case{CaseGrain}})
	require.NoError(t, err)
	assert.Empty(t, p)

	_, err = RunOpenMP(ctx, OpenMPConfig{Workers: []int{0}})
	assert.ErrorIs(t, err, ErrBadOptions)
}

func TestOpenMPName(t *testing.T) {
	assert.Equal(t, "omp_indep_2threads", OpenMPName(CaseIndep, 2))
	assert.Equal(t, "omp_chain_1threads", OpenMPName(CaseChain, 1))
	assert.Equal(t, "omp_handles4_4threads", OpenMPName(CaseHandles4, 4))
	assert.Equal(t, "", OpenMPName(CaseGrain, 2))
}

// OpenMP figures are attached to the overhead records of the same case and
// worker count, beside StarPU's, with the ratio pz/OpenMP; the JSON lines
// carry them under the openmp_ keys and keep the StarPU keys unchanged.
func TestRunAttachesOpenMP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	omp, err := ParsePeer(strings.NewReader("omp_indep_2threads 0.1 us/task\nomp_chain_2threads 0.4 us/task\n"))
	require.NoError(t, err)
	star := Peer{"starpu_c_nodata_eager_total": {2, "us/task"}}
	var out bytes.Buffer
	recs, err := Run(ctx, Options{Policies: []string{"eager"}, Workers: []int{2, 1}, Submitters: []int{1},
		Cases: []Case{CaseIndep, CaseChain, CaseGrain}, Tasks: 200, Rounds: 1, Grains: []int{1}, GrainTasks: 5,
		Peer: star, OpenMP: omp, SchedulerOptions: []scheduler.Option{scheduler.WithPerfModelDir(t.TempDir())}}, &out)
	require.NoError(t, err)
	require.Len(t, recs, 6)
	for i, r := range recs {
		want := map[Case]float64{CaseIndep: 0.1, CaseChain: 0.4}[r.Case]
		if r.Workers != 2 || want == 0 {
			assert.Empty(t, r.OpenMP, "record %d %+v", i, r)
			assert.Nil(t, r.OpenMPValue, "record %d", i)
			assert.Nil(t, r.OpenMPRatio, "record %d", i)
			continue
		}
		assert.Equal(t, OpenMPName(r.Case, 2), r.OpenMP, "record %d", i)
		require.NotNil(t, r.OpenMPValue, "record %d", i)
		require.NotNil(t, r.OpenMPRatio, "record %d", i)
		assert.Equal(t, want, *r.OpenMPValue)
		assert.InDelta(t, r.Value/want, *r.OpenMPRatio, 1e-12)
		if r.Case == CaseIndep {
			assert.Equal(t, "starpu_c_nodata_eager_total", r.Peer, "StarPU's figure stays beside OpenMP's")
		}
	}

	sc := bufio.NewScanner(&out)
	i := 0
	for ; sc.Scan(); i++ {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m))
		_, has := m["openmp_ratio"]
		assert.Equal(t, recs[i].OpenMPRatio != nil, has, "line %d: %s", i, sc.Text())
		if has {
			assert.Contains(t, m, "openmp_peer")
			assert.Contains(t, m, "openmp_value")
		}
		for _, k := range []string{"bench", "case", "policy", "workers", "submitters", "tasks", "value", "unit", "peer"} {
			assert.Contains(t, m, k, "line %d", i)
		}
	}
	assert.Equal(t, len(recs), i)

	var tab bytes.Buffer
	require.NoError(t, WriteTable(&tab, recs))
	lines := strings.Split(strings.TrimSpace(tab.String()), "\n")
	require.Len(t, lines, 1+len(recs))
	assert.Equal(t, []string{"CASE", "POLICY", "WORKERS", "SUBMITTERS", "UNIT", "PZ", "STARPU", "PZ/STARPU", "OPENMP", "PZ/OPENMP"},
		strings.Fields(lines[0]))
	f := strings.Fields(lines[1]) // indep, eager, 2 workers: both peers
	require.Len(t, f, 10, lines[1])
	assert.Equal(t, []string{"indep", "eager", "2", "1", "us/task"}, f[:5])
	assert.Equal(t, "2.000", f[6])
	assert.Equal(t, "0.100", f[8])
	assert.Contains(t, tab.String(), "grain 1us")
}

func TestWriteTableWriteError(t *testing.T) {
	err := WriteTable(failWriter{}, []Record{{Bench: BenchOverhead, Case: CaseIndep, Unit: "us/task"}})
	assert.True(t, errors.Is(err, errWrite), "%v", err)
}

var errWrite = errors.New("write failed")

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errWrite }

// A canceled context stops the build or the run and is reported as such.
func TestRunOpenMPCanceled(t *testing.T) {
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skipf("no C compiler: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := RunOpenMP(ctx, OpenMPConfig{Workers: []int{1}, Tasks: 100, Rounds: 1})
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, ErrNoOpenMP)
}
