package benchtasks

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// ompSource is the OpenMP peer program: the overhead cases as OpenMP tasks
// with depend clauses (see its header comment).
//
//go:embed omp/omp_tasks.c
var ompSource string

// ErrNoOpenMP is returned (wrapped, with the reason) by RunOpenMP when the
// peer cannot be built: no C compiler, or one without OpenMP support.
var ErrNoOpenMP = errors.New("benchtasks: no C compiler with OpenMP (cc -fopenmp); apt-get install gcc libgomp1")

// OpenMPCases returns the cases the OpenMP peer measures: the overhead
// cases, in a new slice.
func OpenMPCases() []Case { return []Case{CaseIndep, CaseChain, CaseHandles4} }

// OpenMPName returns the name of the OpenMP peer's figure for a case on a
// team of threads threads (OMP_NUM_THREADS, equal to pz's worker count),
// e.g. "omp_chain_2threads"; "" for a case the peer does not measure
// (grain).
func OpenMPName(c Case, threads int) string {
	switch c {
	case CaseIndep, CaseChain, CaseHandles4:
		return fmt.Sprintf("omp_%s_%dthreads", c, threads)
	}
	return ""
}

// OpenMPConfig says what RunOpenMP measures.
type OpenMPConfig struct {
	// CC is the C compiler; default "cc".
	CC string
	// Workers lists the team sizes (OMP_NUM_THREADS), one run each: pz's
	// worker counts. Default {DefaultWorkers()}.
	Workers []int
	// Cases to measure; those the peer lacks (grain) are skipped. Default
	// OpenMPCases().
	Cases []Case
	// Tasks and Rounds are the tasks per timed round and the timed rounds
	// (the median is reported, after a warm-up round of Tasks/10), as in
	// Options. Defaults 100000 and 7.
	Tasks, Rounds int
	// Log, when non-nil, receives the compiler's command and the raw
	// output of every run.
	Log io.Writer
}

// RunOpenMP builds the OpenMP peer program (embedded in this package) with
// CC -O2 -fopenmp in a temporary folder, removed before it returns, and
// runs it once per case and team size with OMP_NUM_THREADS set. It returns
// the figures named by OpenMPName, in µs per task. It returns an error
// wrapping ErrNoOpenMP when the compiler is missing or cannot build OpenMP
// code, and another error when a run fails (a lost task included).
func RunOpenMP(ctx context.Context, cfg OpenMPConfig) (Peer, error) {
	if len(cfg.Workers) == 0 {
		cfg.Workers = []int{DefaultWorkers()}
	}
	if len(cfg.Cases) == 0 {
		cfg.Cases = OpenMPCases()
	}
	cfg.Tasks = max(10, defaultInt(cfg.Tasks, 100000)) // the program's minimum
	cfg.Rounds = defaultInt(cfg.Rounds, 7)
	for _, w := range cfg.Workers {
		if w < 1 {
			return nil, fmt.Errorf("%w: %d OpenMP threads", ErrBadOptions, w)
		}
	}
	var cases []Case
	for _, c := range cfg.Cases {
		if OpenMPName(c, 1) != "" {
			cases = append(cases, c)
		}
	}
	p := Peer{}
	if len(cases) == 0 {
		return p, nil
	}

	peer, err := NewOpenMPPeer(ctx, cfg.CC, cfg.Log)
	if err != nil {
		return nil, err
	}
	defer peer.Close()
	for _, w := range cfg.Workers {
		for _, c := range cases {
			v, err := peer.Run(ctx, c, w, cfg.Tasks, cfg.Rounds)
			if err != nil {
				return nil, err
			}
			p[OpenMPName(c, w)] = PeerValue{Value: v, Unit: "us/task"}
		}
	}
	return p, nil
}

// An OpenMPPeer is the OpenMP peer program, built once, to run as often as
// needed: RunOpenMP runs it once per case; Options.PairedOpenMP, one
// round at a time between pz's rounds.
type OpenMPPeer struct {
	dir, bin string
	log      io.Writer
}

// NewOpenMPPeer builds the OpenMP peer program (embedded in this package)
// with cc -O2 -fopenmp ("cc" if empty) in a temporary folder, which Close
// removes. log, when non-nil, receives the compiler's command and the raw
// output of every run. The error wraps ErrNoOpenMP when the compiler is
// missing or cannot build OpenMP code.
func NewOpenMPPeer(ctx context.Context, cc string, log io.Writer) (*OpenMPPeer, error) {
	if cc == "" {
		cc = "cc"
	}
	dir, err := os.MkdirTemp("", "pz-openmp-")
	if err != nil {
		return nil, fmt.Errorf("benchtasks: OpenMP peer scratch dir: %w", err)
	}
	bin, err := buildOpenMP(ctx, cc, dir, log)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &OpenMPPeer{dir: dir, bin: bin, log: log}, nil
}

// Run runs the peer for case c on a team of threads threads: a warm-up
// round of tasks/10, then rounds timed rounds of tasks tasks. It returns
// their median µs per task, and an error for a case the peer lacks, a
// failed run (a lost task included) or a team of another size.
func (p *OpenMPPeer) Run(ctx context.Context, c Case, threads, tasks, rounds int) (float64, error) {
	if OpenMPName(c, threads) == "" || threads < 1 || tasks < 10 || rounds < 1 {
		return 0, fmt.Errorf("%w: OpenMP peer: case %q, %d threads, %d tasks, %d rounds", ErrBadOptions, c, threads, tasks, rounds)
	}
	return runOpenMP(ctx, p.bin, c, threads, tasks, rounds, p.log)
}

// Paired returns a PairedPeer that runs one round of the peer per call
// (of at least 10 tasks, the program's minimum).
func (p *OpenMPPeer) Paired() PairedPeer {
	return func(ctx context.Context, c Case, workers, tasks int) (float64, error) {
		return p.Run(ctx, c, workers, max(10, tasks), 1)
	}
}

// Close removes the built program.
func (p *OpenMPPeer) Close() error {
	if err := os.RemoveAll(p.dir); err != nil {
		return fmt.Errorf("benchtasks: removing the OpenMP peer: %w", err)
	}
	return nil
}

// DefaultWorkers is the worker count Run uses when Options.Workers is
// empty: one per core the Go runtime may use.
func DefaultWorkers() int { return defaultWorkers() }

func defaultInt(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

// buildOpenMP writes the embedded program into dir and compiles it there.
func buildOpenMP(ctx context.Context, cc, dir string, log io.Writer) (string, error) {
	path, err := exec.LookPath(cc)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoOpenMP, err)
	}
	src := filepath.Join(dir, "omp_tasks.c")
	if err := os.WriteFile(src, []byte(ompSource), 0o600); err != nil {
		return "", fmt.Errorf("benchtasks: writing the OpenMP peer source: %w", err)
	}
	bin := filepath.Join(dir, "omp_tasks")
	args := []string{"-O2", "-fopenmp", "-o", bin, src}
	if log != nil {
		fmt.Fprintf(log, "### %s %s\n", path, strings.Join(args, " "))
	}
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("benchtasks: compiling the OpenMP peer: %w", ctx.Err())
		}
		return "", fmt.Errorf("%w: %s -O2 -fopenmp failed: %v\n%s", ErrNoOpenMP, cc, err, bytes.TrimSpace(out))
	}
	return bin, nil
}

// runOpenMP runs the peer for one case on threads threads and returns its
// median µs per task, checking that the team had the size asked for.
func runOpenMP(ctx context.Context, bin string, c Case, threads, tasks, rounds int, log io.Writer) (float64, error) {
	args := []string{"-m", string(c), "-n", strconv.Itoa(tasks), "-r", strconv.Itoa(rounds)}
	cmd := exec.CommandContext(ctx, bin, args...)
	env := []string{}
	for _, kv := range os.Environ() {
		// The team size and its placement are ours to set; inherited
		// OMP_*/GOMP_* settings would change what is measured.
		if !strings.HasPrefix(kv, "OMP_") && !strings.HasPrefix(kv, "GOMP_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "OMP_NUM_THREADS="+strconv.Itoa(threads))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if log != nil {
		fmt.Fprintf(log, "### OMP_NUM_THREADS=%d omp_tasks %s\n%s%s", threads, strings.Join(args, " "), out, stderr.Bytes())
	}
	if ctx.Err() != nil {
		return 0, fmt.Errorf("benchtasks: OpenMP peer, case %s, %d threads: %w", c, threads, ctx.Err())
	}
	if err != nil {
		return 0, fmt.Errorf("benchtasks: OpenMP peer, case %s, %d threads: %w: %s", c, threads, err, bytes.TrimSpace(stderr.Bytes()))
	}
	q, err := ParsePeer(bytes.NewReader(out))
	if err != nil {
		return 0, fmt.Errorf("benchtasks: OpenMP peer output, case %s: %w", c, err)
	}
	v, ok := q["omp_"+string(c)]
	if !ok || v.Value <= 0 {
		return 0, fmt.Errorf("benchtasks: OpenMP peer, case %s: no positive figure in its output %q", c, out)
	}
	if got := q["omp_threads"].Value; got != float64(threads) {
		return 0, fmt.Errorf("benchtasks: OpenMP peer, case %s: ran %g threads, not OMP_NUM_THREADS=%d", c, got, threads)
	}
	return v.Value, nil
}
