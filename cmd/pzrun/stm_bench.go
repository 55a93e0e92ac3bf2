package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pzgo/pz/scheduler/static"
)

// benchSchedule writes the bench's schedule: clients × per runnables on
// cores CPUs at one period, in chains that cross clients (runnable i
// waits for i-1 of the same core's chain, which belongs to another
// client).
func benchSchedule(period time.Duration, clients, per, cores int, spin time.Duration) string {
	n := clients * per
	// Each core's chain gets n/cores runnables, every one a share of the
	// period, so that each starts after a gap the thread sleeps through.
	slotLen := period / time.Duration((n+cores-1)/cores)
	wcet := slotLen / 2
	var b strings.Builder
	fmt.Fprintf(&b, "# pzrun stm bench: %d runnables over %d clients on %d cores at %s.\n", n, clients, cores, period)
	fmt.Fprintf(&b, "spin: %s\nhyperepochs:\n  - name: main\n    period: %s\n    resources: [", spin, period)
	for c := 0; c < cores; c++ {
		if c > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "cpu%d", c)
	}
	b.WriteString("]\n    epochs: [{name: frame}]\nclients: [")
	for c := 0; c < clients; c++ {
		if c > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "c%d", c)
	}
	b.WriteString("]\nrunnables:\n")
	prev := make([]string, cores)
	for i := 0; i < n; i++ {
		core := i % cores
		client := (i / cores) % clients
		name := fmt.Sprintf("r%02d", i)
		deps := ""
		if prev[core] != "" {
			deps = ", deps: [" + prev[core] + "]"
		}
		fmt.Fprintf(&b, "  - {name: %s, client: c%d, resource: cpu%d, wcet: %s%s}\n", name, client, core, wcet, deps)
		prev[core] = name
	}
	return b.String()
}

// benchResult is the line `pzrun stm bench -json` prints (documented in
// docs/static-schedules.md).
type benchResult struct {
	Type      string `json:"type"` // "stm-bench"
	Periods   int    `json:"periods"`
	PeriodNs  int64  `json:"period_ns"`
	Clients   int    `json:"clients"`
	Runnables int    `json:"runnables"`
	// Jitter is pz's start jitter over every runnable run.
	JitterP50 int64 `json:"jitter_p50_ns"`
	JitterP99 int64 `json:"jitter_p99_ns"`
	JitterMax int64 `json:"jitter_max_ns"`
	// Cyclictest's wake-up latency in the same run; 0 with no cyclictest.
	CyclictestP99 int64 `json:"cyclictest_p99_ns"`
	CyclictestMax int64 `json:"cyclictest_max_ns"`
	// Ratio is JitterP99 / CyclictestP99 (target ≤ 1).
	Ratio float64 `json:"ratio"`
	// Overruns counts runs past WCET or deadline; OverrunsLateStart
	// those that missed their deadline because they started late (a
	// predecessor ended late, or their thread started them late, by pz's
	// doing or the machine's): static.Analysis.StartedLate, the
	// analysis' started_late.
	Overruns          int   `json:"overruns"`
	OverrunsLateStart int   `json:"overruns_late_start"`
	Skipped           int   `json:"skipped"`
	GCCycles          int64 `json:"gc_cycles"`
	// Abandoned counts the frames that clients far behind the plan gave
	// up, none run, when the run was stopped (Ctrl-C on a loaded
	// machine): static.RunnableRun.Abandoned, summed.
	Abandoned int64 `json:"abandoned"`
}

func stmBench(ctx context.Context, e *stmEnv, args []string) error {
	fs := flag.NewFlagSet(e.name, flag.ContinueOnError)
	periods := fs.Int64("frames", 10000, "periods to run")
	period := fs.Duration("period", time.Millisecond, "the schedule's period")
	clients := fs.Int("clients", 4, "client processes")
	per := fs.Int("per-client", 4, "runnables per client")
	cores := fs.Int("cores", 2, "CPU cores (cpu0..) the schedule uses")
	spin := fs.Duration("spin", 300*time.Microsecond, "how long before each start a thread spins")
	load := fs.Float64("load", 0.3, "each runnable busy-waits this `fraction` of its WCET")
	jsonOut := fs.Bool("json", false, "print one JSON line (type stm-bench)")
	keep := fs.String("o", "", "also write the run record to `FILE`")
	liveness := fs.Duration("liveness", 10*time.Second, "abort when a runnable falls this far behind its plan (generous: a bench on a busy machine should report lateness, not abort)")
	masterTimeout := addMasterTimeout(fs)
	setup := addSetupTimeout(fs)
	if _, err := e.parse(fs, args, "", 0); err != nil {
		return err
	}
	if *periods < 1 || *clients < 1 || *per < 1 || *cores < 1 || *period <= 0 {
		return fmt.Errorf("%w: -frames, -clients, -per-client, -cores and -period must be positive", errUsage)
	}
	if err := checkMasterTimeout(*masterTimeout); err != nil {
		return err
	}
	if err := checkSetupTimeout(*setup); err != nil {
		return err
	}
	// Before the bench, not after it.
	if err := checkOutFile("-o", *keep); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "pz-stm-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	src := benchSchedule(*period, *clients, *per, *cores, *spin)
	spec, err := static.Parse([]byte(src), "bench.yaml")
	if err != nil {
		return err
	}
	plan, err := static.Compile(spec)
	if err != nil {
		return fmt.Errorf("the bench's schedule does not compile (fewer runnables or a longer period?): %w", err)
	}
	planPath := filepath.Join(dir, "bench.stm")
	if err := writeFile(planPath, func(w io.Writer) error { return static.WritePlan(w, plan) }); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	sock := filepath.Join(dir, "sock")
	opts := append([]static.Option{static.WithDir(sock), static.WithFrames(*periods), static.WithLiveness(*liveness), static.WithLog(func(s string) {
		if !*jsonOut {
			fmt.Fprintln(e.stderr, s)
		}
	})}, setupTimeoutOptions(*setup)...)
	m, err := static.NewMaster(plan, opts...)
	if err != nil {
		return err
	}
	// The clients and cyclictest run in process groups of their own: a
	// Ctrl-C reaches pzrun alone, whose context's end stops the master
	// at a period boundary, which ends the clients; cyclictest is sent
	// SIGTERM, and prints what it measured. They are stopped when the
	// master fails, and die with pzrun.
	clientCtx, stopClients := context.WithCancel(context.WithoutCancel(ctx))
	defer stopClients()
	var wg sync.WaitGroup
	defer wg.Wait()
	cerrs := make([]error, *clients)
	for i, name := range plan.Clients {
		cmd := benchChild(clientCtx, exe, "stm", "client", planPath, name, "-dir", sock, "-load", strconv.FormatFloat(*load, 'g', -1, 64), "-master-timeout", masterTimeout.String())
		cmd.Stdout = io.Discard
		var errBuf bytes.Buffer
		cmd.Stderr = &errBuf
		started := make(chan error, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := startAndWait(cmd, started); err != nil {
				cerrs[i] = fmt.Errorf("client %s: %v: %s", name, err, strings.TrimSpace(errBuf.String()))
			}
		}()
		if err := <-started; err != nil {
			stopClients()
			return fmt.Errorf("starting client %s: %w", name, err)
		}
	}
	// cyclictest measures the machine's wake-up latency at the same time.
	type ctResult struct {
		p99, max int64
		err      error
	}
	ctc := make(chan ctResult, 1)
	go func() {
		p99, mx, err := cyclictest(ctx, *period, *periods)
		ctc <- ctResult{p99, mx, err}
	}()
	if !*jsonOut {
		fmt.Fprintf(e.stderr, "%s: %d periods of %s, %d runnables over %d client processes, cyclictest beside it\n", e.name, *periods, *period, len(plan.Runnables()), *clients)
	}
	run, err := m.Run(ctx)
	if err != nil {
		stopClients()
	}
	wg.Wait()
	ct := <-ctc
	if err != nil {
		return errors.Join(append([]error{err}, cerrs...)...)
	}
	if err := errors.Join(cerrs...); err != nil {
		return err
	}
	if *keep != "" {
		if err := writeFile(*keep, func(w io.Writer) error { return static.WriteRun(w, run) }); err != nil {
			return err
		}
	}
	a := static.Analyze(run)
	res := benchResult{Type: "stm-bench", Periods: run.Periods, PeriodNs: int64(*period), Clients: *clients, Runnables: len(plan.Runnables()),
		JitterP50: a.Jitter.P50, JitterP99: a.Jitter.P99, JitterMax: a.Jitter.Max,
		Overruns: a.Overruns, Skipped: a.Skipped, GCCycles: a.GCCycles}
	// The late starts are the analysis' (static.Analysis.StartedLate,
	// `pzrun stm analyze`'s started_late): one rule, so that the bench
	// and the analysis of its record agree.
	res.OverrunsLateStart = a.StartedLate
	for _, rr := range run.Runnables {
		res.Abandoned += rr.Abandoned
	}
	if ct.err == nil {
		res.CyclictestP99, res.CyclictestMax = ct.p99, ct.max
		if ct.p99 > 0 {
			res.Ratio = float64(res.JitterP99) / float64(ct.p99)
		}
	} else {
		fmt.Fprintf(e.stderr, "%s: no cyclictest figure: %v\n", e.name, ct.err)
	}
	if *jsonOut {
		return json.NewEncoder(e.stdout).Encode(res)
	}
	fmt.Fprintf(e.stdout, "start jitter p50 %s  p99 %s  max %s\n", time.Duration(res.JitterP50), time.Duration(res.JitterP99), time.Duration(res.JitterMax))
	if ct.err == nil {
		fmt.Fprintf(e.stdout, "cyclictest wake-up latency p99 %s  max %s  (pz p99 / cyclictest p99 = %.2f; target ≤ 1)\n", time.Duration(res.CyclictestP99), time.Duration(res.CyclictestMax), res.Ratio)
	}
	fmt.Fprintf(e.stdout, "overruns %d (missed the deadline after a late start: %d), skipped frames %d, GC cycles %d\n", res.Overruns, res.OverrunsLateStart, res.Skipped, res.GCCycles)
	if res.Abandoned > 0 {
		fmt.Fprintf(e.stdout, "frames abandoned after the stop by clients far behind the plan: %d\n", res.Abandoned)
	}
	return nil
}

// cyclictest runs cyclictest (Debian's rt-tests) for loops wake-ups at
// interval and returns its latency's p99 and maximum in ns, from its
// histogram in µs (overflows count as its maximum).
func cyclictest(ctx context.Context, interval time.Duration, loops int64) (p99, maxNs int64, err error) {
	path, err := exec.LookPath("cyclictest")
	if err != nil {
		return 0, 0, errors.New("cyclictest not found: install Debian's rt-tests")
	}
	const buckets = 10000 // µs
	cmd := benchChild(ctx, path, "-m", "-q", "-t", "1", "-i", strconv.FormatInt(int64(interval/time.Microsecond), 10),
		"-l", strconv.FormatInt(loops, 10), "-h", strconv.Itoa(buckets))
	var out bytes.Buffer
	cmd.Stdout = &out
	// Stopped (ctx), it prints the histogram of what it measured.
	if err := startAndWait(cmd, nil); err != nil && ctx.Err() == nil {
		return 0, 0, fmt.Errorf("cyclictest: %w", err)
	}
	return parseCyclictest(out.Bytes())
}

// benchChild is a process of stm bench: in a process group of its own
// (a Ctrl-C at the terminal reaches pzrun alone, which stops it), sent
// SIGTERM when ctx ends, so that it ends its own way (cyclictest prints
// its histogram and removes its /dev/shm/cyclictest<pid>), and killed
// if it still runs a few seconds later; it dies with pzrun (Pdeathsig:
// start it with startAndWait).
func benchChild(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = childProcAttr()
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// startAndWait starts cmd and waits for it on one locked OS thread: the
// kernel sends a child its Pdeathsig when the thread that started it
// ends. Start's error is sent on started (when not nil) before the wait.
func startAndWait(cmd *exec.Cmd, started chan<- error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err := cmd.Start()
	if started != nil {
		started <- err
	}
	if err != nil {
		return err
	}
	return cmd.Wait()
}

// parseCyclictest reads cyclictest's histogram output.
func parseCyclictest(out []byte) (p99, maxNs int64, err error) {
	type bucket struct{ us, n int64 }
	var hist []bucket
	var total, overflows, mx int64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(line, "# Histogram Overflows:"); ok {
			overflows, _ = strconv.ParseInt(strings.TrimSpace(strings.Fields(v)[0]), 10, 64)
			continue
		}
		if v, ok := strings.CutPrefix(line, "# Max Latencies:"); ok {
			mx, _ = strconv.ParseInt(strings.TrimSpace(strings.Fields(v)[0]), 10, 64)
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		us, err1 := strconv.ParseInt(f[0], 10, 64)
		n, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || n == 0 {
			continue
		}
		hist = append(hist, bucket{us, n})
		total += n
	}
	total += overflows
	if total == 0 {
		return 0, 0, errors.New("cyclictest printed no histogram")
	}
	sort.Slice(hist, func(i, j int) bool { return hist[i].us < hist[j].us })
	need := (total*99 + 99) / 100
	var seen int64
	for _, b := range hist {
		seen += b.n
		if seen >= need {
			return b.us * 1000, mx * 1000, nil
		}
	}
	return mx * 1000, mx * 1000, nil // the 99th percentile is an overflow
}
