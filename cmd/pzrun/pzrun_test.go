package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/commbench"
	"github.com/pzgo/pz/hardware/cuda"
	"github.com/pzgo/pz/internal/c2c"
	"github.com/pzgo/pz/internal/fakecuda"
	"github.com/pzgo/pz/internal/launch"
	"github.com/pzgo/pz/internal/progress"
	"github.com/pzgo/pz/scheduler/hypervisor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// noEnv is an environment without MPI launcher variables.
func noEnv(string) string { return "" }

func pzrun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(testCtx(t), args, &out, &errb, noEnv)
	return code, out.String(), errb.String()
}

// TestDeviceMemoryFromEnvironment: a device size given through the
// environment (PZ_SIM_MEMORY with PZ_NSIM, PZ_LIMIT_CUDA_MEM) is checked
// as the flags' are, a usage error (it failed later, in the scheduler,
// with status 1); -cuda-mem caps simulated devices too (it demanded
// -cuda N); a cap without devices is not checked.
func TestDeviceMemoryFromEnvironment(t *testing.T) {
	withEnv := func(m map[string]string, args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(testCtx(t), args, &out, &errb, func(k string) string { return m[k] })
		return code, errb.String()
	}
	code, errs := withEnv(map[string]string{"PZ_NSIM": "1", "PZ_SIM_MEMORY": "100KiB"}, "cholesky", "-n", "1024", "-b", "256", "-device-only")
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, "pzrun cholesky: PZ_SIM_MEMORY=100KiB cannot hold the data of any tile task")
	code, errs = withEnv(map[string]string{"PZ_LIMIT_CUDA_MEM": "1KiB"}, "cholesky", "-n", "256", "-b", "64", "-sim", "1")
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, "pzrun cholesky: PZ_LIMIT_CUDA_MEM=1KiB cannot hold the data of any tile task")
	code, errs = withEnv(map[string]string{"PZ_LIMIT_CUDA_MEM": "1KiB"}, "cholesky", "-n", "256", "-b", "64")
	assert.Equal(t, 0, code, "no device: the cap does not apply: %s", errs)
	code, errs = withEnv(nil, "cholesky", "-n", "256", "-b", "64", "-sim", "1", "-cuda-mem", "1KiB")
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, "-cuda-mem 1KiB cannot hold the data of any tile task")
	// A slow link: a bare number gets the unit hint, one with a unit not.
	code, errs = withEnv(nil, "cholesky", "-n", "256", "-b", "64", "-sim", "1", "-sim-bw", "16")
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, "a rate needs its unit: 16G is 16 GB/s")
	code, errs = withEnv(nil, "cholesky", "-n", "256", "-b", "64", "-sim", "1", "-sim-bw", "500K")
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, "-sim-bw 500K is 500000 bytes per second, below the least a run can use (1M)")
	assert.NotContains(t, errs, "500KG")
	code, errs = withEnv(nil, "cholesky", "-n", "256", "-b", "64", "-cuda-mem", "1MiB")
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, "give -cuda N or -sim N too")
}

func TestHelloEveryRankOneLine(t *testing.T) {
	host, err := os.Hostname()
	require.NoError(t, err)
	for _, n := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			code, out, errs := pzrun(t, "-n", fmt.Sprint(n), "hello")
			require.Equal(t, 0, code, errs)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			require.Len(t, lines, n)
			for i, l := range lines {
				assert.Equal(t, fmt.Sprintf("hello from rank %d of %d on %s (local backend)", i, n, host), l)
			}
		})
	}
}

func TestHelloJSON(t *testing.T) {
	code, out, errs := pzrun(t, "-n", "3", "hello", "--json")
	require.Equal(t, 0, code, errs)
	recs := jsonLines(t, out)
	require.Len(t, recs, 3)
	for i, h := range recs {
		assert.EqualValues(t, i, h["rank"])
		assert.EqualValues(t, 3, h["size"])
		for _, k := range []string{"host", "backend", "gomaxprocs"} {
			assert.Contains(t, h, k)
		}
	}
}

func TestInfoJSON(t *testing.T) {
	code, out, errs := pzrun(t, "-n", "2", "info", "--json")
	require.Equal(t, 0, code, errs)
	recs := jsonLines(t, out)
	require.Len(t, recs, 2)
	for i, rec := range recs {
		assert.EqualValues(t, i, rec["rank"])
		for _, k := range []string{"host", "cpu_logical_cores", "cpu_physical_cores", "cpu_allowed_cores",
			"ram_total_bytes", "ram_available_bytes", "gpus", "gomaxprocs", "gomaxprocs_reason"} {
			assert.Contains(t, rec, k, "line %d", i)
		}
		assert.EqualValues(t, runtime.NumCPU(), rec["cpu_logical_cores"])
		assert.Greater(t, rec["ram_total_bytes"].(float64), float64(0))
		assert.LessOrEqual(t, rec["ram_available_bytes"].(float64), rec["ram_total_bytes"].(float64))
		assert.Equal(t, []any{}, rec["gpus"], "no driver here: an empty list, not null")
	}
}

func TestInfoTable(t *testing.T) {
	code, out, errs := pzrun(t, "info")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "RANK")
	assert.Contains(t, out, "GOMAXPROCS")
	assert.Equal(t, 2, strings.Count(out, "\n"), out)
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no app", nil, "no app given"},
		{"unknown app", []string{"frobnicate"}, `unknown app "frobnicate"; the apps are: `},
		{"misspelt app", []string{"helo"}, `pzrun: unknown app "helo"; did you mean "hello"? The apps are: `},
		{"misspelt benchmark", []string{"bench", "com"}, `unknown app "bench com"; did you mean "bench comm"?`},
		{"misspelt app in help", []string{"help", "cholesk"}, `unknown app "cholesk"; did you mean "cholesky"?`},
		{"a program named without ./", []string{"run.go"}, `(see pzrun help); to run the program run.go here, write ./run.go`},
		{"bad global flag", []string{"-x", "hello"}, "flag provided but not defined: -x"},
		{"bad app flag", []string{"hello", "--nope"}, "flag provided but not defined: -nope"},
		{"global flag after the app", []string{"hello", "-n", "3"}, "-n is pzrun's own flag: put it before the app, as in pzrun -n ... hello"},
		{"global flag after stm", []string{"stm", "run", "x.stm", "-n", "3"}, "-n is pzrun's own flag: put it before the app, as in pzrun -n ... stm run"},
		{"negative n", []string{"-n", "-3", "hello"}, "-n must be at least 1"},
		{"zero n", []string{"-n", "0", "hello"}, "-n must be at least 1, got 0"},
		{"more ranks than memory", []string{"-n", "1000000000", "hello"}, "1000000000 in-process ranks need about "},
		{"zero n for a program", []string{"-n", "0", "./prog"}, "-n must be at least 1, got 0"},
		{"comm timeout with in-process ranks", []string{"-n", "2", "-comm-timeout", "5s", "hello"}, "-comm-timeout bounds MPI operations; with -n 2 the ranks run in-process"},
		{"help for an unknown app", []string{"help", "nosuch"}, `pzrun help: unknown app "nosuch"; the apps are: `},
		{"help for an unknown benchmark", []string{"help", "bench", "nosuch"}, `unknown app "bench nosuch"`},
		{"no tasks", []string{"bench", "tasks", "-tasks", "0", "-starpu=false", "-openmp=false"}, "-tasks 0 and -rounds 7: want at least 2 tasks and 1 round"},
		{"no rounds", []string{"bench", "tasks", "-rounds", "0", "-starpu=false", "-openmp=false"}, "-tasks 100000 and -rounds 0"},
		{"bench comm buffers beyond memory", []string{"-n", "256", "bench", "comm", "-peer="}, "-sizes up to 16.0 MiB on 256 ranks need about 1.0 TiB of buffers"},
		{"zero scale", []string{"bench", "comm", "-scale", "0", "-peer="}, "-scale 0: want a positive iteration multiplier"},
		{"negative scale", []string{"bench", "comm", "-scale", "-1", "-peer="}, "-scale -1"},
		{"bad peer thread level", []string{"bench", "comm", "-peer-thread", "bogus"}, `-peer-thread "bogus": single or multiple`},
		{"bench comm without JSON", []string{"bench", "comm", "-json=false", "-peer="}, "-json=false: bench comm prints JSON lines only"},
		{"bench tasks JSON and a table", []string{"bench", "tasks", "-json", "-format", "table", "-starpu=false", "-openmp=false"}, "-json with -format table: give one of them"},
		{"zero tile for contexts", []string{"contexts", "-b", "0"}, "-b 0 must be positive (defaults 2048, 4096, 256)"},
		{"zero small matrix", []string{"contexts", "-large", "512", "-small", "0"}, "-small 0, -large 512"},
		{"small above large", []string{"contexts", "-large", "512", "-small", "1024", "-b", "128"}, "the small matrix's order 1024 is above the large one's 512"},
		{"zero repeat", []string{"contexts", "-repeat", "0"}, "-repeat 0: want at least 1"},
		{"sim memory below a tile", []string{"cholesky", "-n", "1024", "-b", "256", "-sim", "1", "-sim-mem", "1KiB"}, "-sim-mem 1KiB cannot hold the data of any tile task (at least 256.0 KiB with -b 256 fp32)"},
		{"sim memory below a gemm task", []string{"gemm", "-n", "1024", "-b", "256", "-sim", "1", "-sim-mem", "2MiB"}, "-sim-mem 2MiB cannot hold the data of any tile task (at least 2.2 MiB"},
		{"device-only below the biggest task", []string{"cholesky", "-n", "1024", "-b", "256", "-sim", "1", "-sim-mem", "512KiB", "-device-only"}, "which -device-only must run on the device"},
		{"cholesky beyond memory", []string{"cholesky", "-n", "10000000", "-b", "1000"}, "pzrun cholesky: invalid options: the run needs at least 909.5 TiB of memory"},
		{"gemm beyond memory", []string{"-n", "2", "gemm", "-n", "10000000", "-b", "1000"}, "pzrun gemm: invalid options: the run needs at least "},
		{"negative comm timeout", []string{"-comm-timeout", "-1s", "hello"}, "-comm-timeout -1s: want a duration >= 0"},
		{"bad comm timeout", []string{"-comm-timeout", "soon", "hello"}, "invalid value"},
		{"extra args", []string{"hello", "extra"}, "unexpected arguments"},
		{"bench without name", []string{"bench"}, "bench needs a benchmark name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errs := pzrun(t, c.args...)
			assert.Equal(t, 2, code, errs)
			assert.Contains(t, errs, c.want)
			assert.NotContains(t, errs, "goroutine ", "no panic")
			assert.NotContains(t, errs, "usage: usage", "no mark")
		})
	}
	_, _, errs := pzrun(t, "frobnicate")
	for _, a := range apps() {
		assert.Contains(t, errs, a.name, "the error lists every app")
	}
}

// TestInfoDevices: the simulated devices PZ_NSIM opens on every rank are
// listed by pzrun info, as a table and in the JSON.
func TestInfoDevices(t *testing.T) {
	env := map[string]string{"PZ_NSIM": "2", "PZ_SIM_MEMORY": "64MiB"}
	withSims := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(testCtx(t), args, &out, &errb, func(k string) string { return env[k] })
		return code, out.String(), errb.String()
	}
	code, out, errs := withSims("-n", "2", "info", "--json")
	require.Equal(t, 0, code, errs)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2)
	for _, l := range lines {
		var r struct {
			Devices []struct {
				Name        string `json:"name"`
				Kind        string `json:"kind"`
				MemoryBytes int64  `json:"memory_bytes"`
			} `json:"devices"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		require.Len(t, r.Devices, 2, l)
		assert.Equal(t, "sim1", r.Devices[1].Name)
		assert.Equal(t, int64(64<<20), r.Devices[1].MemoryBytes)
	}
	code, out, errs = withSims("info")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "sim0 (sim, 64.0 MiB)")
}

// TestCommTimeoutFlag: -comm-timeout reaches comm/mpi's Init (here and
// in the programs pzrun starts) as PZ_COMM_TIMEOUT.
func TestCommTimeoutFlag(t *testing.T) {
	t.Setenv("PZ_COMM_TIMEOUT", "") // restored after the test
	code, _, errs := pzrun(t, "-comm-timeout", "7s", "hello")
	require.Equal(t, 0, code, errs)
	assert.Equal(t, "7s", os.Getenv("PZ_COMM_TIMEOUT"))
	assert.Contains(t, errs, "this run is not under an MPI launcher", "a note: nothing to bound here")
}

func TestNUnderLauncherIsUsageError(t *testing.T) {
	var out, errb bytes.Buffer
	env := func(k string) string {
		if k == "OMPI_COMM_WORLD_SIZE" {
			return "2"
		}
		return ""
	}
	code := run(testCtx(t), []string{"-n", "2", "hello"}, &out, &errb, env)
	assert.Equal(t, 2, code)
	assert.Contains(t, errb.String(), "let mpirun choose the ranks")
}

// A usage error every rank finds is printed once, without the ranks;
// ranks that fail alike are named once with their message.
func TestUsageErrorOncePerJob(t *testing.T) {
	code, _, errs := pzrun(t, "-n", "3", "cholesky", "-n", "100", "-b", "7")
	assert.Equal(t, 2, code)
	assert.Equal(t, "pzrun cholesky: invalid options: matrix size 100 is not a multiple of block size 7 (try -n 105)\n", errs)
	code, _, errs = pzrun(t, "-n", "2", "cholesky", "-policy", "bogus")
	assert.Equal(t, 2, code)
	assert.Equal(t, 1, strings.Count(errs, "\n"), errs)

	same := errors.New("boom")
	err := comm.RankErrors{{Rank: 1, Err: same}, {Rank: 0, Err: same}, {Rank: 2, Err: errors.New("other")}}
	assert.Equal(t, "ranks 0-1: boom\nrank 2: other", describe(err))
	assert.Equal(t, "rank 0: x", describe(comm.RankErrors{{Rank: 0, Err: errors.New("x")}}))
	u := fmt.Errorf("%w: bad -x", errUsage)
	assert.Equal(t, "bad -x", describe(comm.RankErrors{{Rank: 0, Err: u}, {Rank: 1, Err: u}}))
	assert.Equal(t, "rank 0: bad -x\nrank 1: other", describe(comm.RankErrors{{Rank: 0, Err: u}, {Rank: 1, Err: errors.New("other")}}))
	assert.Equal(t, "bad -x", describe(u))
}

// `pzrun help APP` and `pzrun APP -h` print the same text on stdout with
// status 0; stm's and bench's help list their commands.
func TestHelp(t *testing.T) {
	for _, app := range [][]string{{"hello"}, {"bench", "comm"}, {"cholesky"}} {
		code, viaHelp, errs := pzrun(t, append([]string{"help"}, app...)...)
		require.Equal(t, 0, code, errs)
		assert.Empty(t, errs)
		code, viaH, errs := pzrun(t, append(app, "-h")...)
		require.Equal(t, 0, code, errs)
		assert.Empty(t, errs)
		assert.Equal(t, viaHelp, viaH, "%v", app)
		assert.True(t, strings.HasPrefix(viaH, "usage: pzrun [-n N] "+strings.Join(app, " ")+" [flags]\n"), viaH)
	}
	code, out, _ := pzrun(t, "help", "stm")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "usage: pzrun stm COMMAND")
	code, out, _ = pzrun(t, "help", "stm", "run")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "usage: pzrun stm run PLAN")
	assert.Contains(t, out, "-allocs")
	for _, args := range [][]string{{"help", "bench"}, {"bench", "-h"}} {
		code, out, _ = pzrun(t, args...)
		assert.Equal(t, 0, code)
		assert.Contains(t, out, "usage: pzrun [-n N] bench NAME", args)
		assert.Contains(t, out, "  comm ", args)
		assert.Contains(t, out, "  tasks ", args)
	}
	// A bad flag: the error and the usage on stderr, status 2.
	code, out, errs := pzrun(t, "hello", "-nope")
	assert.Equal(t, 2, code)
	assert.Empty(t, out)
	assert.True(t, strings.HasPrefix(errs, "pzrun hello: flag provided but not defined: -nope\nusage: pzrun [-n N] hello"), errs)
}

func TestHelpListsApps(t *testing.T) {
	code, out, _ := pzrun(t, "help")
	require.Equal(t, 0, code)
	for _, a := range apps() {
		assert.Contains(t, out, a.name)
	}
	assert.Contains(t, out, "(pzrun help stm)", "the form the docs and the footer use")
	code, out, _ = pzrun(t, "help", "info")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "-json")
}

// buildPzrun builds the real binary (with extra build flags) for tests that
// need a process: exit statuses, mpirun.
func buildPzrun(t *testing.T, tags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pzrun")
	args := []string{"build", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

func TestBinaryExitStatusAndRefusalUnderMpirun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildPzrun(t)
	cmd := exec.Command(bin, "nosuchapp")
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 2, ee.ExitCode())

	// Launched as if by mpirun with 4 ranks: it must refuse, not run 4
	// copies of rank 0.
	cmd = exec.Command(bin, "hello")
	cmd.Env = append(os.Environ(), "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=1")
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "-tags mpi")
	assert.NotContains(t, string(out), "hello from rank")

	lau, _ := launch.For(launch.OpenMPI)
	mpirun, err := lau.Run()
	if err != nil {
		t.Log("mpirun not installed: the real-launcher half is skipped")
		return
	}
	out, err = exec.Command(mpirun, append(lau.Args(2), bin, "hello")...).CombinedOutput()
	require.Error(t, err, "a binary without MPI under mpirun -n 2 must fail:\n%s", out)
	assert.Contains(t, string(out), "-tags mpi")
	assert.NotContains(t, string(out), "hello from rank")
}

func TestTiledApps(t *testing.T) {
	code, out, errs := pzrun(t, "cholesky", "-n", "256", "-b", "64", "--check", "--json")
	require.Equal(t, 0, code, errs)
	var r map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	assert.Equal(t, "cholesky", r["app"])
	assert.Equal(t, true, r["checked"])
	assert.Less(t, r["residual"].(float64), 1e-3)
	assert.Greater(t, r["gflops"].(float64), 0.0)

	code, out, errs = pzrun(t, "-n", "2", "gemm", "-n", "128", "-b", "32", "-precision", "64", "--check", "-policy", "dmda")
	require.Equal(t, 0, code, errs)
	assert.Equal(t, 1, strings.Count(out, "\n"), "only the root prints: %s", out)
	assert.Contains(t, out, "gemm n=128 b=32 fp64")

	code, _, errs = pzrun(t, "cholesky", "-policy", "nosuch")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, `unknown policy "nosuch"; valid: dmda, eager, lws, prio, random, ws`)

	code, _, errs = pzrun(t, "cholesky", "-n", "100", "-b", "64")
	assert.Equal(t, 2, code, "flags that do not fit together are a usage error")
	assert.Contains(t, errs, "multiple")
}

// TestCholeskyOutOfCore factors a 1 MiB matrix with a simulated device
// of 256 KiB beside a CPU worker (how the tasks split between them is
// the policy's choice: only the result is checked), then with every task
// on a device of 192 KiB: it evicts tiles and writes modified ones back,
// and the residual is that of a correct factorization.
func TestCholeskyOutOfCore(t *testing.T) {
	code, out, errs := pzrun(t, "cholesky", "-n", "512", "-b", "64", "-workers", "1", "-sim", "1", "-sim-mem", "256KiB", "--check", "--json")
	require.Equal(t, 0, code, errs)
	var r map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	assert.Less(t, r["residual"].(float64), 1e-3)
	assert.Equal(t, 1.0, r["devices"])
	assert.Equal(t, 2.0, r["workers"], "one CPU worker and the device's")

	// Every task on the device, whose memory holds a third of what the
	// factorization touches: evictions write modified tiles back.
	code, out, errs = pzrun(t, "cholesky", "-n", "512", "-b", "64", "-workers", "1", "-sim", "1", "-sim-mem", "192KiB", "-device-only", "--check", "--json")
	require.Equal(t, 0, code, errs)
	r = map[string]any{}
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	assert.Less(t, r["residual"].(float64), 1e-3)
	assert.Equal(t, r["tasks"], r["device_tasks"])
	assert.Greater(t, r["evictions"].(float64), 0.0)
	assert.Greater(t, r["write_backs"].(float64), 0.0)
	assert.Greater(t, r["device_bytes"].(float64), float64(192<<10), "more than the device holds crossed the link")

	code, out, errs = pzrun(t, "gemm", "-n", "128", "-b", "64", "-sim", "1", "-sim-bw", "mem", "--check", "--json")
	require.Equal(t, 0, code, "-sim-bw mem: copies at memory speed; %s", errs)
	assert.Contains(t, out, `"devices":1`)

	code, _, errs = pzrun(t, "gemm", "-n", "128", "-b", "64", "-sim", "1", "-device-only")
	assert.Equal(t, 2, code, "gemm has no device-only mode")
	assert.Contains(t, errs, "-device-only is cholesky's")

	code, _, errs = pzrun(t, "cholesky", "-n", "128", "-b", "64", "-device-only")
	assert.Equal(t, 2, code, "a flag combination is a usage error")
	assert.Contains(t, errs, "DeviceOnly (-device-only) needs devices (pzrun: -sim N, or -cuda N")

	for _, bad := range [][]string{{"-sim", "-1"}, {"-sim-mem", "1MiB"}, {"-sim", "1", "-sim-mem", "lots"}, {"-sim", "1", "-sim-bw", "0"}, {"-sim", "1", "-sim-bw", "16"}} {
		code, _, errs = pzrun(t, append([]string{"cholesky", "-n", "128", "-b", "64"}, bad...)...)
		assert.Equal(t, 2, code, "%v: %s", bad, errs)
		assert.Contains(t, errs, "-sim", bad)
	}
	code, _, errs = pzrun(t, "-n", "2", "cholesky", "-n", "128", "-b", "64", "-sim", "1", "-device-only")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "one-rank runs")

	// Two ranks, each with a device too small for its share: the tiles
	// sent between ranks leave from, and arrive into, RAM.
	code, out, errs = pzrun(t, "-n", "2", "cholesky", "-n", "512", "-b", "64", "-workers", "1", "-sim", "1", "-sim-mem", "96KiB", "--check", "--json")
	require.Equal(t, 0, code, errs)
	r = map[string]any{}
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	assert.Less(t, r["residual"].(float64), 1e-3)
	assert.Equal(t, 2.0, r["ranks"])
	assert.Equal(t, 2.0, r["devices"], "one per rank")
}

func TestBenchTasksWithPeerFile(t *testing.T) {
	peer := filepath.Join(t.TempDir(), "peer.txt")
	require.NoError(t, os.WriteFile(peer, []byte("# StarPU\nstarpu_c_nodata_eager_total 2.0 us/task\n"), 0o644))
	code, out, errs := pzrun(t, "bench", "tasks", "-cases", "indep", "-policies", "eager", "-tasks", "2000", "-rounds", "1", "-peer-file", peer)
	require.Equal(t, 0, code, errs)
	recs := jsonLines(t, out)
	require.Len(t, recs, 2, "one line per submitter count (1, 2)")
	for _, r := range recs {
		assert.Equal(t, "starpu_c_nodata_eager_total", r["peer"])
		assert.InDelta(t, r["value"].(float64)/2.0, r["ratio"].(float64), 1e-9)
	}
	code, _, errs = pzrun(t, "bench", "tasks", "-cases", "bogus", "-starpu=false")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "unknown case")
	code, _, errs = pzrun(t, "bench", "tasks", "-format", "yaml", "-starpu=false")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "json or table")
}

// The OpenMP peer is built with the system compiler and its figure printed
// beside pz's, in the JSON lines and in the table; without a compiler the
// run goes on and says why there is no OpenMP figure.
func TestBenchTasksOpenMP(t *testing.T) {
	args := []string{"bench", "tasks", "-cases", "indep,chain,handles4", "-policies", "lws", "-tasks", "2000", "-rounds", "1", "-starpu=false"}

	code, out, errs := pzrun(t, append(args, "-cc", "/nonexistent/cc")...)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, errs, "no OpenMP figures")
	assert.Contains(t, errs, "/nonexistent/cc")
	assert.NotContains(t, out, "openmp")
	assert.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 6, "3 cases x 2 submitter counts")

	if testing.Short() {
		t.Skip("compiles and runs the OpenMP peer")
	}
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skipf("no C compiler: %v", err)
	}
	// Round by round (the default), and once per case before pz's rounds.
	for _, paired := range []bool{true, false} {
		code, out, errs = pzrun(t, append(args, fmt.Sprintf("-openmp-paired=%t", paired))...)
		require.Equal(t, 0, code, errs)
		recs := jsonLines(t, out)
		require.Len(t, recs, 6)
		for _, r := range recs {
			assert.Equal(t, fmt.Sprintf("omp_%s_%vthreads", r["case"], r["workers"]), r["openmp_peer"], r)
			assert.Greater(t, r["openmp_value"].(float64), 0.0, r)
			assert.InDelta(t, r["value"].(float64)/r["openmp_value"].(float64), r["openmp_ratio"].(float64), 1e-9, r)
			if paired {
				assert.Greater(t, r["openmp_paired_ratio"].(float64), 0.0, r)
			} else {
				assert.NotContains(t, r, "openmp_paired_ratio", r)
			}
		}
	}

	code, out, errs = pzrun(t, append(args, "-format", "table")...)
	require.Equal(t, 0, code, errs)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 7, "header and 6 rows:\n%s", out)
	assert.Contains(t, lines[0], "PZ/OPENMP")
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		require.Len(t, f, 12, l) // the last, C2C NS, may be "-" (a busy machine)
		assert.NotEqual(t, "-", f[10], "a paired ratio: %s", l)
		assert.NotEqual(t, "-", f[8], "an OpenMP figure: %s", l)
		assert.Equal(t, "-", f[6], "no StarPU figure with -starpu=false: %s", l)
	}
}

// -submitters-work makes each submitter one of the workers (a scheduler
// Driver): its records say so, in JSON and in the table; every count of
// -submitters is measured; bad counts are refused before anything runs.
func TestBenchTasksSubmittersWork(t *testing.T) {
	args := []string{"bench", "tasks", "-cases", "indep,chain", "-policies", "lws,dmda", "-submitters", "1", "-tasks", "2000", "-rounds", "1", "-starpu=false", "-openmp=false"}
	code, out, errs := pzrun(t, append(args, "-submitters-work")...)
	require.Equal(t, 0, code, errs)
	recs := jsonLines(t, out)
	require.Len(t, recs, 4, "2 policies x 2 cases x 1 submitter count:\n%s", out)
	for _, r := range recs {
		assert.Equal(t, true, r["submitters_work"], r)
		assert.EqualValues(t, 1, r["submitters"], r)
		assert.Greater(t, r["value"].(float64), 0.0, r)
	}
	code, out, errs = pzrun(t, args...)
	require.Equal(t, 0, code, errs)
	assert.NotContains(t, out, "submitters_work", "absent without the flag")
	code, out, errs = pzrun(t, append(args, "-submitters-work", "-format", "table")...)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "1 working")

	for _, bad := range [][]string{{"-submitters", "0"}, {"-submitters", "one"}, {"-submitters", "1,"}, {"-submitters", "99", "-submitters-work"}} {
		code, _, errs = pzrun(t, append([]string{"bench", "tasks", "-starpu=false", "-openmp=false"}, bad...)...)
		assert.Equal(t, 2, code, bad)
		assert.Contains(t, errs, "-submitters", bad)
	}
}

func TestBenchComm(t *testing.T) {
	code, out, errs := pzrun(t, "-n", "3", "bench", "comm", "-sizes", "8,1024", "-scale", "0.01", "-peer=")
	require.Equal(t, 0, code, errs)
	recs := jsonLines(t, out)
	require.Len(t, recs, 6, "3 collectives x 2 sizes")
	for _, r := range recs {
		assert.EqualValues(t, 3, r["ranks"])
		assert.Equal(t, "local", r["backend"])
		assert.Greater(t, r["median_us"].(float64), 0.0)
	}
	assert.NotContains(t, errs, "peer skipped", "-peer '' skips the peer without a word")
	for _, r := range recs {
		assert.NotContains(t, r, "rounds", "one round: no rounds field")
	}

	// Rounds: one line per case, with the count; a peer that is not
	// there is said once, not once per round.
	code, out, errs = pzrun(t, "-n", "2", "bench", "comm", "-ops", "allreduce", "-sizes", "8", "-scale", "0.01", "-rounds", "3", "-peer", t.TempDir())
	require.Equal(t, 0, code, errs)
	recs = jsonLines(t, out)
	require.Len(t, recs, 1, out)
	assert.EqualValues(t, 3, recs[0]["rounds"])
	assert.Greater(t, recs[0]["median_us"].(float64), 0.0)
	assert.NotContains(t, recs[0], "paired_ratio", "no peer ran")
	assert.Equal(t, 1, strings.Count(errs, "peer skipped"), errs)

	code, _, errs = pzrun(t, "bench", "comm", "-rounds", "0", "-peer=")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "-rounds must be at least 1")
	code, _, errs = pzrun(t, "bench", "comm", "-sizes", "7")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "not a positive multiple of 8")
	code, _, errs = pzrun(t, "bench", "nothing")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, `unknown app "bench nothing"`)
}

// measureRounds samples the cores before each round when asked to and
// records the median of the samples that succeeded (c2c_ns); without a
// sampler the results have none.
func TestMeasureRoundsSamples(t *testing.T) {
	e := &env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	f := benchCommFlags{rounds: 3}
	samples := []time.Duration{400, 0, 200}
	var order []string
	sample := func() (time.Duration, error) {
		order = append(order, "sample")
		d := samples[0]
		samples = samples[1:]
		if d == 0 {
			return 0, c2c.ErrBusy
		}
		return d, nil
	}
	measure := func() ([]commbench.Result, error) {
		order = append(order, "measure")
		return []commbench.Result{{Op: "allreduce", Bytes: 8, MedianUS: 1}}, nil
	}
	rs, err := measureRounds(context.Background(), e, f, 0, sample, measure)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	assert.Equal(t, 300.0, rs[0].C2CNs, "the median of 400 and 200; the busy sample left out")
	assert.Equal(t, []string{"sample", "measure", "sample", "measure", "sample", "measure"}, order)

	rs, err = measureRounds(context.Background(), e, f, 0, nil, measure)
	require.NoError(t, err)
	assert.Zero(t, rs[0].C2CNs)
}

func TestContextsApp(t *testing.T) {
	code, out, errs := pzrun(t, "contexts", "-small", "256", "-large", "512", "-b", "64", "-workers", "2", "-check", "-json")
	require.Equal(t, 0, code, errs)
	recs := jsonLines(t, out)
	require.Len(t, recs, 4, "three modes and the summary:\n%s", out)
	modes := map[string]bool{}
	for _, r := range recs[:3] {
		modes[r["mode"].(string)] = true
		assert.Greater(t, r["makespan_s"].(float64), 0.0)
		assert.Less(t, r["residual_small"].(float64), 1e-3, r)
		assert.Less(t, r["residual_large"].(float64), 1e-3, r)
		assert.Equal(t, true, r["checked"], r)
	}
	assert.Len(t, modes, 3, "global, static and hypervisor runs")
	sum := recs[3]
	for _, k := range []string{"global_s", "static_s", "hypervisor_s", "gain_vs_static", "gain_vs_global"} {
		assert.Contains(t, sum, k)
	}
	assert.NotContains(t, errs, "context resize", "resizes are logged with -v only")
	// With -v every resize the hypervisor made is logged. Whether it
	// makes one in so short a run depends on the machine's load (the
	// large factorization may end first): run until one did, each time
	// matching the log against the resizes counted in the JSON.
	resized := false
	for try := 0; try < 8 && !resized; try++ {
		code, out, errs = pzrun(t, "contexts", "-small", "256", "-large", "512", "-b", "64", "-workers", "2", "-v", "-json")
		require.Equal(t, 0, code, errs)
		recs = jsonLines(t, out)
		require.Len(t, recs, 4, out)
		require.Equal(t, "hypervisor", recs[2]["mode"], out)
		n := int(recs[2]["resizes"].(float64))
		assert.Equal(t, n, strings.Count(errs, "context resize"), "with -v every resize is logged:\n%s", errs)
		resized = n > 0
	}
	assert.True(t, resized, "the hypervisor moved no worker in 8 runs")

	code, _, errs = pzrun(t, "contexts", "-workers", "1")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "at least 2")
	code, _, errs = pzrun(t, "contexts", "-hypervisor", "nosuch", "-small", "256", "-large", "512", "-b", "64")
	assert.Equal(t, 2, code, errs)
	// The flag and the valid names, not the library's option names.
	assert.Contains(t, errs, `-hypervisor "nosuch": unknown policy "nosuch"; the policies are `+strings.Join(hypervisor.Policies(), ", "))
	assert.NotContains(t, errs, "WithPolicyName")
	// An empty -hypervisor ran the default policy in silence.
	code, out, errs = pzrun(t, "contexts", "-hypervisor", "", "-small", "256", "-large", "512", "-b", "64")
	assert.Equal(t, 2, code, errs)
	assert.Empty(t, out)
	assert.Contains(t, errs, "pzrun contexts: -hypervisor \"\": name a hypervisor policy")
}

// TestSignalExitStatus interrupts a long run of the real binary: every rank
// stops and the exit status is 128+signo.
func TestSignalExitStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildPzrun(t)
	for sig, want := range map[syscall.Signal]int{syscall.SIGTERM: 143, syscall.SIGINT: 130} {
		cmd := exec.Command(bin, "-n", "2", "bench", "tasks", "-cases", "grain", "-policies", "eager", "-starpu=false", "-openmp=false")
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		// The first result line says the app is running (its signal
		// handler installed); the remaining grains take seconds more.
		first, drained := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(drained)
			sc := bufio.NewScanner(stdout)
			if sc.Scan() {
				close(first)
			}
			_, _ = io.Copy(io.Discard, stdout)
		}()
		select {
		case <-first:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("pzrun printed nothing")
		}
		require.NoError(t, cmd.Process.Signal(sig))
		done := make(chan error, 1)
		go func() { <-drained; done <- cmd.Wait() }() // reads end before Wait
		select {
		case err := <-done:
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "%v", sig)
			assert.Equal(t, want, ee.ExitCode(), "%v", sig)
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("pzrun did not stop on %v", sig)
		}
	}
}

// A signal to the pzrun process that launched a program reaches the
// program as the same signal, once, and pzrun exits with the program's
// own status, not 128 plus the signal it received.
func TestLaunchedProgramStatusOnSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildPzrun(t)
	prog := filepath.Join(t.TempDir(), "trap.sh")
	require.NoError(t, os.WriteFile(prog, []byte("#!/bin/sh\ntrap 'echo stopped by INT; exit 3' INT\ntrap 'echo stopped by TERM; exit 3' TERM\necho ready\nwhile :; do sleep 0.01; done\n"), 0o755))
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		ready := make(chan struct{})
		out := &readyWriter{ready: ready}
		cmd := exec.Command(bin, prog)
		cmd.Stdout = out
		require.NoError(t, cmd.Start())
		select {
		case <-ready:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatal("the program never started")
		}
		require.NoError(t, cmd.Process.Signal(sig))
		err := cmd.Wait()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%v", sig)
		assert.Equal(t, 3, ee.ExitCode(), "%v: the program's status", sig)
		out.mu.Lock()
		assert.Equal(t, 1, strings.Count(out.b.String(), "stopped by "), "%v: one stop: %s", sig, out.b.String())
		assert.Contains(t, out.b.String(), "stopped by "+strings.TrimPrefix(signalName(sig), "SIG"), "%v: the same signal", sig)
		out.mu.Unlock()
	}
}

// An app that runs on one rank's scheduler says so when given several
// ranks, instead of leaving them idle in silence; one that spans the ranks
// (cholesky) does not.
func TestOneRankAppSaysSo(t *testing.T) {
	code, _, errs := pzrun(t, "-n", "3", "contexts", "-small", "256", "-large", "512", "-b", "64", "-workers", "2")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, errs, "pzrun contexts: runs on one rank's scheduler: rank 0 runs it, ranks 1-2 wait")
	code, out, errs := pzrun(t, "-n", "2", "cholesky", "-n", "256", "-b", "64", "-check")
	require.Equal(t, 0, code, errs)
	assert.NotContains(t, errs, "runs on one rank's scheduler")
	assert.Contains(t, out, "ranks=2 grid=1x2")
}

// pzrun launches a user's program with its ranks, passing its arguments
// and exit status through.
func TestLaunchProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an example")
	}
	bin := filepath.Join(t.TempDir(), "allreduce")
	out, err := exec.Command("go", "build", "-o", bin, "../../examples/allreduce").CombinedOutput()
	require.NoError(t, err, string(out))
	for n, ranks := range map[int]string{1: "1 rank", 3: "3 ranks"} {
		code, stdout, errs := pzrun(t, "-n", fmt.Sprint(n), bin)
		require.Equal(t, 0, code, errs)
		assert.Contains(t, stdout, fmt.Sprintf("allreduce over %s (local backend)", ranks))
	}
	// A failing program's status comes back.
	fail := filepath.Join(t.TempDir(), "fail.sh")
	require.NoError(t, os.WriteFile(fail, []byte("#!/bin/sh\necho \"$PZ_RANKS $*\"\nexit 7\n"), 0o755))
	code, stdout, _ := pzrun(t, "-n", "2", fail, "a", "-b")
	assert.Equal(t, 7, code)
	assert.Equal(t, "2 a -b\n", stdout)
	// Not a program.
	code, _, errs := pzrun(t, "./no-such-program")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "no such file")
	dir := t.TempDir()
	code, _, errs = pzrun(t, dir+"/")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "is a directory, not a program")
	// A file that exists but is not executable: the advice must not be
	// to build over it (it was "go build -o /etc/passwd .").
	data := filepath.Join(dir, "data.txt")
	require.NoError(t, os.WriteFile(data, []byte("x"), 0o644))
	code, _, errs = pzrun(t, data)
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, data+" is not executable")
	assert.NotContains(t, errs, "go build -o "+data)
}

// The apps' option errors name the flag to change.
func TestAppErrorsNameFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"cholesky", "-n", "512", "-b", "0"}, "(-b) must be in 1..512"},
		{[]string{"cholesky", "-n", "4"}, "block size 256 (-b) must be in 1..4, the matrix size (-n)"},
		{[]string{"cholesky", "-n", "512", "-b", "128", "-workers", "-3"}, "(-workers) must not be negative"},
		{[]string{"-n", "4", "cholesky", "-n", "512", "-b", "128", "-grid", "3x3"}, "-grid PxQ"},
	} {
		code, _, errs := pzrun(t, c.args...)
		assert.NotEqual(t, 0, code, "%v", c.args)
		assert.Contains(t, errs, c.want, "%v", c.args)
	}
}

// readyWriter closes ready when the output first contains "ready".
type readyWriter struct {
	mu    sync.Mutex
	b     strings.Builder
	ready chan struct{}
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if w.ready != nil && strings.Contains(w.b.String(), "ready") {
		close(w.ready)
		w.ready = nil
	}
	return len(p), nil
}

// A stop of pzrun (SIGINT/SIGTERM: its context ends) reaches the program
// as SIGTERM; the program's status comes back.
func TestLaunchProgramPassesStop(t *testing.T) {
	prog := filepath.Join(t.TempDir(), "trap.sh")
	require.NoError(t, os.WriteFile(prog, []byte("#!/bin/sh\ntrap 'echo stopped; exit 3' TERM\necho ready\nwhile :; do sleep 0.01; done\n"), 0o755))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	out := &readyWriter{ready: ready}
	var errb bytes.Buffer
	codec := make(chan int, 1)
	go func() { codec <- run(ctx, []string{prog}, out, &errb, noEnv) }()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("the program never started")
	}
	cancel()
	select {
	case code := <-codec:
		assert.Equal(t, 3, code, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatal("pzrun did not end")
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	assert.Contains(t, out.b.String(), "stopped")
}

// -cpuprofile writes a CPU profile that go tool pprof reads (a gzipped
// protocol buffer); under an MPI launcher each rank's process writes
// FILE.RANK; a file that cannot be made fails the run before the app.
func TestCPUProfile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cpu.prof")
	code, out, errs := pzrun(t, "-cpuprofile", path, "-n", "2", "cholesky", "-n", "256", "-b", "64")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "cholesky n=256")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(b), 2)
	assert.Equal(t, []byte{0x1f, 0x8b}, b[:2], "a gzipped profile")

	mpiEnv := func(k string) string {
		return map[string]string{"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "3"}[k]
	}
	stop, err := startCPUProfile(path, mpiEnv)
	require.NoError(t, err)
	require.NoError(t, stop())
	assert.FileExists(t, path+".3", "rank 3's profile")

	// A path that cannot be written is a usage error before the app
	// runs, as the apps' output files are (it was status 1).
	code, out, errs = pzrun(t, "-cpuprofile", filepath.Join(dir, "missing", "cpu.prof"), "hello")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "-cpuprofile")
	assert.Contains(t, errs, "mkdir -p")
	assert.Empty(t, out, "the app does not run")

	for _, what := range [][]string{{"./prog"}, {"stm", "bench"}} {
		code, _, errs = pzrun(t, append([]string{"-cpuprofile", path}, what...)...)
		assert.Equal(t, 2, code, what)
		assert.Contains(t, errs, "-cpuprofile profiles pzrun's apps", what)
	}
}

// jsonLines parses out, one JSON object per line (pzrun's --json
// output), failing the test on a line that is not one.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		recs = append(recs, r)
	}
	return recs
}

// TestCholeskyCUDA runs `pzrun cholesky -cuda 1` on the stand-in CUDA
// driver, cuBLAS and cuSOLVER (internal/fakecuda, named by the
// PZ_*_LIBRARY variables): hybrid, then on the GPU alone out of core.
func TestCholeskyCUDA(t *testing.T) {
	lib := fakecuda.Instance(t)
	fakecuda.Setenv(t, 1, 160<<10)
	fakecuda.SetDelay(t, 0)
	fakecuda.SetLibraries(t, lib)
	t.Setenv("PZ_PERFMODEL_DIR", t.TempDir())
	for _, extra := range [][]string{nil, {"-device-only"}, {"-device-only", "-pageable"}} {
		args := append([]string{"cholesky", "-n", "256", "-b", "64", "-precision", "64", "-workers", "1", "-cuda", "1", "--check", "--json"}, extra...)
		code, out, errs := pzrun(t, args...)
		require.Equal(t, 0, code, "%v: %s", extra, errs)
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &r), out)
		assert.Less(t, r["residual"].(float64), 1e-12, extra)
		assert.Equal(t, 1.0, r["devices"], extra)
		if slices.Contains(extra, "-pageable") {
			assert.NotContains(t, r, "pinned", extra)
		} else {
			assert.Equal(t, true, r["pinned"], "%v: the tiles page-locked for the GPU", extra)
		}
		if len(extra) > 0 && extra[0] == "-device-only" { // hybrid runs split the tasks as the policy likes
			assert.Equal(t, r["tasks"], r["device_tasks"])
			assert.Greater(t, r["write_backs"].(float64), 0.0, "512 KiB of tiles on a GPU of 160 KiB")
		}
	}
	// GEMM on the GPU alone (a context of its worker would need
	// -device-only; with one CPU worker and policy eager, the check is of
	// the result), and in both precisions.
	for _, prec := range []string{"32", "64"} {
		code, out, errs := pzrun(t, "gemm", "-n", "256", "-b", "64", "-precision", prec, "-workers", "1", "-cuda", "1", "--check", "--json")
		require.Equal(t, 0, code, errs)
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &r), out)
		assert.Equal(t, 1.0, r["devices"])
		assert.Equal(t, true, r["checked"])
		assert.Equal(t, true, r["pinned"])
	}
	// Over two in-process ranks, each with a GPU worker on the one GPU.
	for _, app := range []string{"cholesky", "gemm"} {
		code, out, errs := pzrun(t, "-n", "2", app, "-n", "256", "-b", "64", "-precision", "64", "-workers", "1", "-cuda", "1", "--check", "--json")
		require.Equal(t, 0, code, "%s: %s", app, errs)
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &r), out)
		assert.Equal(t, 2.0, r["ranks"], app)
		assert.Equal(t, 2.0, r["devices"], "%s: a GPU worker per rank", app)
		assert.Equal(t, true, r["checked"], app)
	}
	code, _, errs := pzrun(t, "-n", "2", "cholesky", "-n", "128", "-b", "64", "-cuda", "1", "-cuda-reference")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "-cuda-reference serves one-rank runs")

	// One library call on the whole matrix beside the tiled run, on a
	// GPU with room for the matrix beside the run's cached tiles.
	lib = fakecuda.Instance(t)
	fakecuda.Setenv(t, 1, 16<<20)
	fakecuda.SetLibraries(t, lib)
	for _, app := range []string{"cholesky", "gemm"} {
		code, out, errs := pzrun(t, app, "-n", "128", "-b", "64", "-precision", "64", "-workers", "1", "-cuda", "1", "-cuda-reference", "--json")
		require.Equal(t, 0, code, errs)
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &r), out)
		assert.Greater(t, r["gpu_reference_gflops"].(float64), 0.0, app)
		assert.InDelta(t, r["gflops"].(float64)/r["gpu_reference_gflops"].(float64), r["gpu_reference_ratio"].(float64), 1e-9, app)
		code, out, errs = pzrun(t, app, "-n", "128", "-b", "64", "-workers", "1", "-cuda", "1", "-cuda-reference")
		require.Equal(t, 0, code, errs)
		assert.Contains(t, out, "one library call on the GPU", app)
	}
	code, _, errs = pzrun(t, "cholesky", "-n", "128", "-b", "64", "-cuda-reference")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "give -cuda N too")

	// -cuda-mem: the same GPU (16 MiB, room for the 512 KiB matrix) in
	// core, then capped below the matrix: out of core, same result.
	for _, capped := range []bool{false, true} {
		args := []string{"cholesky", "-n", "256", "-b", "64", "-precision", "64", "-workers", "1", "-cuda", "1", "-device-only", "--check", "--json"}
		if capped {
			args = append(args, "-cuda-mem", "160KiB")
		}
		code, out, errs := pzrun(t, args...)
		require.Equal(t, 0, code, errs)
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &r), out)
		assert.Less(t, r["residual"].(float64), 1e-12)
		if capped {
			assert.Greater(t, r["evictions"].(float64), 0.0, "512 KiB of tiles in 160 KiB")
		} else {
			assert.Equal(t, 0.0, r["evictions"], "16 MiB hold the tiles")
		}
	}
	for _, bad := range [][]string{{"-cuda-mem", "1GiB"}, {"-cuda", "1", "-cuda-mem", "lots"}, {"-cuda", "1", "-cuda-mem", "0"}} {
		code, _, errs = pzrun(t, append([]string{"cholesky", "-n", "128", "-b", "64"}, bad...)...)
		assert.Equal(t, 2, code, bad)
		assert.Contains(t, errs, "-cuda-mem", bad)
	}
}

// TestCUDAWithoutGPU: -cuda on a machine without a driver runs on the
// CPUs and says so on stderr.
func TestCUDAWithoutGPU(t *testing.T) {
	if _, err := cuda.Open(); !cuda.IsNoDriver(err) {
		t.Skip("this machine has a CUDA driver")
	}
	t.Setenv("PZ_CUDA_LIBRARY", "")
	code, out, errs := pzrun(t, "cholesky", "-n", "128", "-b", "64", "-workers", "1", "-cuda", "1", "--check", "--json")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, errs, "no CUDA GPU here")
	var r map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	assert.Equal(t, 0.0, r["devices"])
}

// TestBenchTasksProgress: bench tasks draws a bar of the figures
// measured on stderr (a terminal's: forced here), not on stdout, whose
// JSON lines stay whole; with -format table too, where nothing else
// shows until the last figure. Found in the new-user trial: pzrun bench
// tasks -format table ran a minute and more without a sign of life.
func TestBenchTasksProgress(t *testing.T) {
	defer func(f func(io.Writer, string, int) *progress.Bar) { newBar = f }(newBar)
	newBar = func(w io.Writer, label string, total int) *progress.Bar {
		return progress.NewForced(w, label, total, 0)
	}
	args := []string{"bench", "tasks", "-cases", "indep,grain", "-policies", "lws", "-submitters", "1", "-tasks", "200", "-rounds", "1", "-starpu=false", "-openmp=false"}
	code, out, errs := pzrun(t, args...)
	require.Equal(t, 0, code, errs)
	require.Len(t, jsonLines(t, out), 4, "indep and 3 grains")
	assert.Contains(t, errs, "bench tasks figures")
	assert.Contains(t, errs, "(4/4)")

	code, out, errs = pzrun(t, append(args, "-format", "table")...)
	require.Equal(t, 0, code, errs)
	assert.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 5, "header and 4 rows:\n%s", out)
	assert.Contains(t, errs, "(4/4)")
}
