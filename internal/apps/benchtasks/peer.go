package benchtasks

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pzgo/pz/internal/peerdir"
)

// ErrNoStarPU is returned by RunStarPU when StarPU 1.3 is not installed
// (pkg-config starpu-1.3 fails or its examples are missing).
var ErrNoStarPU = errors.New("benchtasks: StarPU 1.3 not installed (apt-get install libstarpu-dev starpu-examples)")

// ErrBadPeerFile is returned by ParsePeer for a line that is neither a
// comment nor "name value unit".
var ErrBadPeerFile = errors.New("benchtasks: malformed peer results line")

// A PeerValue is one figure of a peer: its value and unit.
type PeerValue struct {
	Value float64
	Unit  string
}

// Peer maps figure names, as printed by ../shared/peers/starpu/run.sh
// (e.g. starpu_c_nodata_lws_total), to their values.
type Peer map[string]PeerValue

// ParsePeer reads "name value unit" lines, the output format of the
// StarPU peer script. Lines starting with '#' and empty lines are skipped,
// and so are figures whose value is not a number (the script prints
// FAIL(...) for a failed run); any other line shape is an error wrapping
// ErrBadPeerFile.
func ParsePeer(r io.Reader) (Peer, error) {
	p := Peer{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		f := strings.Fields(s)
		if len(f) != 3 {
			return nil, fmt.Errorf("%w %d: %q", ErrBadPeerFile, line, s)
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		p[f[0]] = PeerValue{Value: v, Unit: f[2]}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("benchtasks: reading peer results: %w", err)
	}
	return p, nil
}

// starPUPolicies are the policies StarPU and pz share; figures of the
// other pz policies have no peer.
var starPUPolicies = []string{"eager", "ws", "lws", "dmda"}

func isStarPUPolicy(p string) bool {
	for _, q := range starPUPolicies {
		if p == q {
			return true
		}
	}
	return false
}

// PeerName returns the name of StarPU's figure for a case, or "" when
// StarPU has none. The mapping, with the StarPU program that measures it
// (see ../shared/peers/starpu/run.sh):
//
//	indep,    w workers  starpu_c_nodata_<policy>_total        starpu_overhead.c -m nodata (submit all, wait all)
//	indep,    1 worker   starpu_c_nodata_ncpu1_<policy>_total  same, STARPU_NCPU=1
//	chain,    w workers  starpu_c_rw1_<policy>_total           starpu_overhead.c -m rw1 (one RW handle)
//	chain,    1 worker   starpu_c_rw1_ncpu1_<policy>_total     same, STARPU_NCPU=1
//	handles4, w workers  tasks_overhead_rw4chain_<policy>      examples/tasks_overhead -b 4 (4 RW handles)
//	grain g,  w workers  tasks_size_overhead_eff_<g>us_<w>cpu_<policy>  examples/tasks_size_overhead
//
// where w is the machine's worker count (the peer script's STARPU_NCPU).
// The handles4 figure is produced only by RunStarPU, not by run.sh.
func PeerName(c Case, policy string, workers, grainUS int) string {
	if !isStarPUPolicy(policy) {
		return ""
	}
	ncpu := ""
	if workers == 1 {
		ncpu = "ncpu1_"
	}
	switch c {
	case CaseIndep:
		return "starpu_c_nodata_" + ncpu + policy + "_total"
	case CaseChain:
		return "starpu_c_rw1_" + ncpu + policy + "_total"
	case CaseHandles4:
		if workers == 1 {
			return "tasks_overhead_rw4chain_ncpu1_" + policy
		}
		return "tasks_overhead_rw4chain_" + policy
	case CaseGrain:
		return fmt.Sprintf("tasks_size_overhead_eff_%dus_%dcpu_%s", grainUS, workers, policy)
	}
	return ""
}

// StarPUConfig says what RunStarPU measures.
type StarPUConfig struct {
	// Policies are the scheduling policies to run; those StarPU lacks are
	// skipped. Default: eager, ws, lws, dmda.
	Policies []string
	// Workers is STARPU_NCPU for the overhead figures (the grain figures
	// always cover 1 and Workers CPUs).
	Workers int
	// Tasks and Rounds are the task count per round and the timed rounds
	// of starpu_overhead.c (-n, -r) and the task count of tasks_overhead.
	Tasks, Rounds int
	// GrainTasks is tasks_size_overhead's -i (tasks per CPU); Grains the
	// task durations in µs (-t min -T max -f factor: they must form a
	// geometric series, as 1, 16, 256 does).
	GrainTasks int
	Grains     []int
	// PeerDir is the folder of the StarPU peer (starpu_overhead.c), the
	// team's ../shared/peers/starpu; "" finds it beside the module root
	// above the working directory.
	PeerDir string
	// Log, when non-nil, receives the raw output of every StarPU run.
	Log io.Writer
}

const starpuExamples = "/usr/lib/x86_64-linux-gnu/starpu/examples"

// RunStarPU measures the StarPU peer figures named by PeerName on this
// machine: it compiles starpu_overhead.c (a copy of the peer script's
// program, embedded here) against pkg-config starpu-1.3 with gcc, and runs
// it and StarPU's shipped tasks_overhead and tasks_size_overhead examples
// with CPU workers only and a fresh STARPU_HOME. It takes about
// 10 s per policy at the default sizes. It returns ErrNoStarPU when StarPU
// is missing.
func RunStarPU(ctx context.Context, cfg StarPUConfig) (Peer, error) {
	if err := exec.CommandContext(ctx, "pkg-config", "--exists", "starpu-1.3").Run(); err != nil {
		return nil, fmt.Errorf("%w: pkg-config: %v", ErrNoStarPU, err)
	}
	if _, err := os.Stat(filepath.Join(starpuExamples, "tasks_overhead")); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoStarPU, err)
	}
	dir, err := os.MkdirTemp("", "pz-starpu-")
	if err != nil {
		return nil, fmt.Errorf("benchtasks: starpu scratch dir: %w", err)
	}
	defer os.RemoveAll(dir)
	peerDir := cfg.PeerDir
	if peerDir == "" {
		peerDir = peerdir.Find("starpu")
	}
	bin, err := buildOverhead(ctx, peerDir, dir)
	if err != nil {
		return nil, err
	}
	r := starpuRunner{dir: dir, log: cfg.Log}
	if len(cfg.Policies) == 0 {
		cfg.Policies = starPUPolicies
	}
	cfg.Workers = max(1, cfg.Workers)
	p := Peer{}
	w := strconv.Itoa(cfg.Workers)
	for _, pol := range cfg.Policies {
		if !isStarPUPolicy(pol) {
			continue
		}
		for _, ncpu := range []string{w, "1"} {
			infix := ""
			if ncpu == "1" && w != "1" {
				infix = "ncpu1_"
			} else if ncpu == "1" {
				continue // Workers is 1: already measured
			}
			for _, m := range []string{"nodata", "rw1"} {
				name := "starpu_c_" + m + "_" + infix + pol
				out, err := r.run(ctx, ncpu, pol, bin, "-m", m, "-n", strconv.Itoa(cfg.Tasks), "-r", strconv.Itoa(cfg.Rounds), "-p", name)
				if err != nil {
					return nil, err
				}
				q, err := ParsePeer(strings.NewReader(out))
				if err != nil {
					return nil, fmt.Errorf("benchtasks: %s output: %w", name, err)
				}
				for k, v := range q {
					p[k] = v
				}
			}
			out, err := r.run(ctx, ncpu, pol, filepath.Join(starpuExamples, "tasks_overhead"), "-i", strconv.Itoa(cfg.Tasks), "-b", "4")
			if err != nil {
				return nil, err
			}
			if v, ok := perTask(out); ok {
				p["tasks_overhead_rw4chain_"+infix+pol] = PeerValue{v, "us/task"}
			}
		}
		if len(cfg.Grains) > 0 {
			g := cfg.Grains
			args := []string{"-i", strconv.Itoa(cfg.GrainTasks), "-c", "1", "-C", w, "-s", strconv.Itoa(max(1, cfg.Workers-1)),
				"-t", strconv.Itoa(g[0]), "-T", strconv.Itoa(g[len(g)-1])}
			if len(g) > 1 {
				args = append(args, "-f", strconv.Itoa(g[1]/g[0]))
			}
			out, err := r.run(ctx, w, pol, filepath.Join(starpuExamples, "tasks_size_overhead"), args...)
			if err != nil {
				return nil, err
			}
			for k, v := range parseSizeOverhead(out, pol) {
				p[k] = v
			}
		}
	}
	return p, nil
}

// buildOverhead compiles the peer's starpu_overhead.c into dir.
func buildOverhead(ctx context.Context, peerDir, dir string) (string, error) {
	src := filepath.Join(peerDir, "starpu_overhead.c")
	if _, err := os.Stat(src); err != nil {
		return "", fmt.Errorf("%w: the StarPU peer program: %v (set StarPUConfig.PeerDir to ../shared/peers/starpu)", ErrNoStarPU, err)
	}
	flags, err := exec.CommandContext(ctx, "pkg-config", "--cflags", "--libs", "starpu-1.3").Output()
	if err != nil {
		return "", fmt.Errorf("%w: pkg-config --cflags --libs: %v", ErrNoStarPU, err)
	}
	bin := filepath.Join(dir, "starpu_overhead")
	args := append([]string{"-O2", "-o", bin, src}, strings.Fields(string(flags))...)
	if out, err := exec.CommandContext(ctx, "gcc", args...).CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("benchtasks: compiling starpu_overhead.c: %w", context.Cause(ctx))
		}
		return "", fmt.Errorf("benchtasks: compiling starpu_overhead.c: %w\n%s", err, out)
	}
	return bin, nil
}

type starpuRunner struct {
	dir string
	log io.Writer
}

// run runs one StarPU program with the peer script's environment: CPU
// workers only, silent, a fresh STARPU_HOME (no calibration carried over
// from other runs), every other STARPU_* variable removed.
func (r starpuRunner) run(ctx context.Context, ncpu, policy, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STARPU_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "STARPU_NCPU="+ncpu, "STARPU_NCUDA=0", "STARPU_NOPENCL=0", "STARPU_SILENT=1",
		"STARPU_SCHED="+policy, "STARPU_HOME="+filepath.Join(r.dir, "home"))
	out, err := cmd.CombinedOutput()
	if r.log != nil {
		fmt.Fprintf(r.log, "### STARPU_NCPU=%s STARPU_SCHED=%s %s %s\n%s", ncpu, policy, bin, strings.Join(args, " "), out)
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("benchtasks: running %s %s (policy %s): %w", filepath.Base(bin), strings.Join(args, " "), policy, context.Cause(ctx))
	}
	if err != nil {
		return "", fmt.Errorf("benchtasks: running %s %s (policy %s): %w", filepath.Base(bin), strings.Join(args, " "), policy, err)
	}
	return string(out), nil
}

// perTask extracts "Per task: V usecs" from StarPU's tasks_overhead.
func perTask(out string) (float64, bool) {
	v, ok := 0.0, false
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[0] == "Per" && f[1] == "task:" {
			if x, err := strconv.ParseFloat(f[2], 64); err == nil {
				v, ok = x, true
			}
		}
	}
	return v, ok
}

// parseSizeOverhead turns tasks_size_overhead's table into efficiencies,
// with run.sh's formula: the program runs ntasks per CPU and prints
// wall/ncpus, so efficiency = ntasks·grain / (ncpus · printed).
func parseSizeOverhead(out, policy string) Peer {
	p := Peer{}
	nt := 0.0
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 4 && f[0] == "#" && f[1] == "tasks" && f[2] == ":" {
			nt, _ = strconv.ParseFloat(f[3], 64)
			continue
		}
		ncpu, err := strconv.Atoi(f0(f))
		if err != nil || nt == 0 {
			continue
		}
		for i := 1; i+1 < len(f); i += 2 {
			g, err1 := strconv.ParseFloat(f[i], 64)
			t, err2 := strconv.ParseFloat(f[i+1], 64)
			if err1 != nil || err2 != nil || t <= 0 {
				continue
			}
			name := fmt.Sprintf("tasks_size_overhead_eff_%gus_%dcpu_%s", g, ncpu, policy)
			p[name] = PeerValue{nt * g / 1e6 / (float64(ncpu) * t), "ratio"}
		}
	}
	return p
}

func f0(f []string) string {
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
