package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pzgo/pz/internal/plural"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/internal/launch"
	"github.com/pzgo/pz/runtimeview"
	"github.com/pzgo/pz/scheduler/static"
)

// stmUsage lists the stm subcommands.
func stmUsage(w io.Writer) {
	fmt.Fprintln(w, `usage: pzrun stm COMMAND [flags] ARGS

static periodic schedules (docs/static-schedules.md):
  compile SCHEDULE.yaml [-o PLAN.stm] [-svg FILE]   verify and compile; print the timeline and slack
  master PLAN [-frames N] [-o RUN.json]           run the master; clients connect in any order
  client PLAN NAME [-load F]                      a client whose runnables busy-wait F of their WCET
  run PLAN [-frames N] [-o RUN.json] [-load F]    every client in this process (with -n N: on N ranks)
  analyze RUN.json [-svg FILE] [-trace FILE]      start jitter, run time vs WCET, overruns, allocations
  bench [-frames N] [-json]                       a 1 kHz schedule of 16 runnables over 4 client processes, next to cyclictest

PLAN is a compiled .stm file or a schedule's .yaml (compiled on the fly).
`+"`pzrun stm COMMAND -h`"+` lists a command's flags.`)
}

// runSTM runs `pzrun stm ...`; it returns the exit status.
func runSTM(ctx context.Context, n int, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		w := stdout
		if len(args) == 0 {
			w = stderr
		}
		stmUsage(w)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	cmd, rest := args[0], args[1:]
	cmds := map[string]func(context.Context, *stmEnv, []string) error{
		"compile": stmCompile,
		"master":  stmMaster,
		"client":  stmClient,
		"run":     stmRun,
		"analyze": stmAnalyze,
		"bench":   stmBench,
	}
	f, ok := cmds[cmd]
	if !ok {
		fmt.Fprintf(stderr, "pzrun stm: unknown command %q\n", cmd)
		stmUsage(stderr)
		return exitUsage
	}
	if n > 0 && cmd != "run" {
		fmt.Fprintf(stderr, "pzrun stm %s: -n applies to stm run only (its ranks are the clients)\n", cmd)
		return exitUsage
	}
	e := &stmEnv{stdout: &syncWriter{w: stdout}, stderr: &syncWriter{w: stderr}, getenv: getenv, n: n, name: "pzrun stm " + cmd}
	if err := f(ctx, e, rest); err != nil {
		switch {
		case errors.Is(err, flag.ErrHelp):
			return exitOK
		case errors.Is(err, errReported):
			return exitUsage
		}
		fmt.Fprintf(stderr, "%s: %s\n", e.name, describe(err))
		if errors.Is(err, errUsage) {
			return exitUsage
		}
		return exitFail
	}
	return exitOK
}

// errReported marks a usage error already printed, with the usage.
var errReported = errors.New("reported")

type stmEnv struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	n              int
	name           string
}

// parse parses flags and positional arguments in any order, and checks
// that there are want positional ones (named in usage).
func (e *stmEnv) parse(fs *flag.FlagSet, args []string, usage string, want int) ([]string, error) {
	fs.SetOutput(io.Discard)
	// As pzrun's apps: -h prints on stdout, a bad flag's usage on stderr.
	line := e.name + " " + usage
	if usage == "" {
		line = e.name + " [flags]"
	}
	printUsage := func(w io.Writer) {
		fmt.Fprintf(w, "usage: %s\n\nflags:\n", line)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printUsage(e.stdout)
				return nil, err
			}
			fmt.Fprintf(e.stderr, "%s: %v%s\n", e.name, err, flagHint(fs, err))
			printUsage(e.stderr)
			return nil, fmt.Errorf("%w: %w", errUsage, errReported)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if want == 0 && len(pos) > 0 {
		return nil, fmt.Errorf("%w: it takes flags only, got %d argument(s) %q (%s -h lists the flags)", errUsage, len(pos), pos, e.name)
	}
	if len(pos) != want {
		return nil, fmt.Errorf("%w: want %s, got %d argument(s) %q", errUsage, usage, len(pos), pos)
	}
	return pos, nil
}

// loadPlan reads a compiled plan, or compiles a YAML schedule.
func loadPlan(path string) (*static.Plan, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if t := bytes.TrimSpace(src); len(t) > 0 && t[0] == '{' {
		return static.ReadPlan(bytes.NewReader(src))
	}
	return compileSource(src, path)
}

// compileSource parses and compiles a schedule's YAML.
func compileSource(src []byte, path string) (*static.Plan, error) {
	spec, err := static.Parse(src, path)
	if err != nil {
		return nil, err
	}
	return static.Compile(spec)
}

func writeFile(path string, write func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func stmCompile(_ context.Context, e *stmEnv, args []string) error {
	fs := flag.NewFlagSet(e.name, flag.ContinueOnError)
	out := fs.String("o", "", "write the compiled plan to `FILE` (default: SCHEDULE with .stm)")
	svg := fs.String("svg", "", "draw the planned timeline as SVG to `FILE`")
	quiet := fs.Bool("q", false, "do not print the timeline")
	pos, err := e.parse(fs, args, "SCHEDULE.yaml", 1)
	if err != nil {
		return err
	}
	// Before the plan is written: not one file of the two.
	if err := checkOutFile("-o", *out); err != nil {
		return err
	}
	if err := checkOutFile("-svg", *svg); err != nil {
		return err
	}
	src, err := os.ReadFile(pos[0])
	if err != nil {
		return err
	}
	plan, err := compileSource(src, pos[0])
	if list := (static.ErrorList)(nil); errors.As(err, &list) {
		fmt.Fprintln(e.stderr, list.Error())
		return fmt.Errorf("%d problem(s) in %s", len(list), pos[0])
	}
	if err != nil {
		return err
	}
	if *out == "" {
		*out = strings.TrimSuffix(pos[0], filepath.Ext(pos[0])) + ".stm"
	}
	if err := writeFile(*out, func(w io.Writer) error { return static.WritePlan(w, plan) }); err != nil {
		return err
	}
	if *svg != "" {
		if err := writeFile(*svg, func(w io.Writer) error { return static.WriteSVG(w, plan) }); err != nil {
			return err
		}
	}
	if !*quiet {
		if err := static.WriteTimeline(e.stdout, plan); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.stderr, "%s: wrote %s\n", e.name, *out)
	if *svg != "" {
		fmt.Fprintf(e.stderr, "%s: drew the timeline in %s\n", e.name, *svg)
	}
	return nil
}

// runFlags are the flags of the commands that run a plan.
type runFlags struct {
	frames   *int64
	out      *string
	dir      *string
	liveness *time.Duration
	setup    *time.Duration
	jsonOut  *bool
	allocs   *bool
}

func addRunFlags(fs *flag.FlagSet) runFlags {
	return runFlags{
		frames:   fs.Int64("frames", 0, "stop after `N` periods of every hyperepoch (0: until SIGINT/SIGTERM)"),
		out:      fs.String("o", "", "write the run record (every runnable's planned and actual times) to `FILE`"),
		dir:      fs.String("dir", "", "socket `DIR`ectory (default $PZ_STM_DIR, else $XDG_RUNTIME_DIR/pz-stm, else /dev/shm/pz-stm-UID (/tmp without /dev/shm); stm run uses one only on several ranks)"),
		liveness: fs.Duration("liveness", time.Second, "abort when a runnable falls this far behind its plan (a dead or stopped client); at least two of the plan's longest periods, which 0 gives"),
		setup:    addSetupTimeout(fs),
		jsonOut:  fs.Bool("json", false, "print the analysis as JSON lines instead of a table"),
		allocs:   fs.Bool("allocs", false, "count allocations around every run, to name the runnables that allocate (a diagnostic mode: it delays starts)"),
	}
}

// check refuses flag values a run cannot use, before it starts.
func (f runFlags) check() error {
	if *f.frames < 0 {
		return fmt.Errorf("%w: -frames %d: want a number of periods >= 0 (0: until SIGINT/SIGTERM)", errUsage, *f.frames)
	}
	if *f.liveness < 0 {
		return fmt.Errorf("%w: -liveness %v: want a duration >= 0 (at least two periods are used)", errUsage, *f.liveness)
	}
	if err := checkSetupTimeout(*f.setup); err != nil {
		return err
	}
	if *f.out != "" {
		// Found out before the run, not after it: a run that cannot be
		// recorded is not started.
		if err := checkWritable(*f.out); err != nil {
			return fmt.Errorf("%w: -o %s: %v", errUsage, *f.out, err)
		}
	}
	return nil
}

// checkWritable reports whether path can be written: it creates the file
// if it does not exist (and removes it again), or opens it for writing.
func checkWritable(path string) error {
	_, statErr := os.Stat(path)
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if err := fh.Close(); err != nil {
		return err
	}
	if os.IsNotExist(statErr) {
		// Another rank of the job may probe the same path at once and
		// have removed it already.
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

func (f runFlags) options(e *stmEnv) []static.Option {
	opts := []static.Option{static.WithFrames(*f.frames), static.WithLiveness(*f.liveness),
		static.WithLog(func(m string) { fmt.Fprintln(e.stderr, m) })}
	opts = append(opts, setupTimeoutOptions(*f.setup)...)
	if *f.allocs {
		opts = append(opts, static.WithAllocationCounts())
	}
	dir := *f.dir
	if dir == "" {
		dir = static.DefaultDir(e.getenv)
	}
	return append(opts, static.WithDir(dir))
}

// report writes the run record and prints its analysis.
func (f runFlags) report(e *stmEnv, run *static.Run) error {
	if run == nil {
		return nil
	}
	var werr error
	if *f.out != "" {
		// A failure to write the record still prints the analysis: the
		// run is not lost with it.
		werr = writeFile(*f.out, func(w io.Writer) error { return static.WriteRun(w, run) })
	}
	a := static.Analyze(run)
	var err error
	if *f.jsonOut {
		err = a.WriteJSON(e.stdout)
	} else {
		err = a.WriteText(e.stdout)
	}
	if werr != nil {
		return errors.Join(fmt.Errorf("writing the run record: %w", werr), err)
	}
	return err
}

func stmMaster(ctx context.Context, e *stmEnv, args []string) error {
	fs := flag.NewFlagSet(e.name, flag.ContinueOnError)
	rf := addRunFlags(fs)
	pos, err := e.parse(fs, args, "PLAN", 1)
	if err != nil {
		return err
	}
	if err := rf.check(); err != nil {
		return err
	}
	plan, err := loadPlan(pos[0])
	if err != nil {
		return err
	}
	m, err := static.NewMaster(plan, rf.options(e)...)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	run, err := m.Run(ctx)
	if rerr := rf.report(e, run); err == nil {
		err = rerr
	}
	return err
}

// syntheticClient registers, for every runnable of client name, a body
// that busy-waits load times its WCET (a GPU runnable enqueues that on a
// host stream).
func syntheticClient(plan *static.Plan, name string, load float64, opts ...static.ClientOption) (*static.Client, func(), error) {
	if err := plan.CheckClient(name); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	c, err := static.NewClient(name, opts...)
	if err != nil {
		return nil, nil, err
	}
	streams := map[string]*static.HostStream{}
	for _, r := range plan.Runnables() {
		if r.Client != name {
			continue
		}
		work := time.Duration(load * float64(r.WCET))
		if r.Submitter != "" {
			s := streams[r.Resource]
			if s == nil {
				s = static.NewHostStream()
				streams[r.Resource] = s
				c.Resource(r.Resource, s)
			}
			job := func() { busy(work) } // made once: a closure per run would allocate in the loop
			c.Runnable(r.Name, func(context.Context) error {
				s.Enqueue(job)
				return nil
			})
			continue
		}
		c.Runnable(r.Name, func(context.Context) error { busy(work); return nil })
	}
	return c, func() {
		for _, s := range streams {
			s.Close()
		}
	}, nil
}

// clientLog prints client name's warnings (an unpinned thread) on
// stderr, after its name.
func clientLog(e *stmEnv, name string) static.ClientOption {
	return static.WithClientLog(func(m string) { fmt.Fprintln(e.stderr, name+": "+m) })
}

// busy spins for d: synthetic CPU work that does not allocate.
func busy(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
	}
}

// addMasterTimeout adds the -master-timeout flag of the commands that
// run clients (static.WithMasterTimeout).
func addMasterTimeout(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("master-timeout", 0, "a client leaves the run (or its wait for the start) when the master has not beaten for this `D`uration (stopped, deadlocked, starved); 0: the master's -liveness bound")
}

// addSetupTimeout adds the -setup-timeout flag of the commands that run
// a master (stm master, run, bench): static.WithSetupTimeout.
func addSetupTimeout(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("setup-timeout", 0, "abort the run when a client is not ready (its records built, its resource threads started and pinned) this `D`uration after the start, naming it; 0: 10s; at least the -liveness bound")
}

// checkSetupTimeout refuses a negative -setup-timeout.
func checkSetupTimeout(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: -setup-timeout %v: want a duration >= 0 (0: 10s; at least the -liveness bound is used)", errUsage, d)
	}
	return nil
}

// setupTimeoutOptions returns the master's option for a -setup-timeout
// of d: none for 0, static's default.
func setupTimeoutOptions(d time.Duration) []static.Option {
	if d == 0 {
		return nil
	}
	return []static.Option{static.WithSetupTimeout(d)}
}

// checkMasterTimeout refuses a negative -master-timeout.
func checkMasterTimeout(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: -master-timeout %v: want a duration >= 0 (0: the master's -liveness bound)", errUsage, d)
	}
	return nil
}

func stmClient(ctx context.Context, e *stmEnv, args []string) error {
	fs := flag.NewFlagSet(e.name, flag.ContinueOnError)
	load := fs.Float64("load", 0.5, "each runnable busy-waits this `fraction` of its WCET")
	dir := fs.String("dir", "", "socket `DIR`ectory (as the master's)")
	masterTimeout := addMasterTimeout(fs)
	pos, err := e.parse(fs, args, "PLAN NAME", 2)
	if err != nil {
		return err
	}
	if *load < 0 || *load > 10 {
		return fmt.Errorf("%w: -load must be between 0 and 10, got %g", errUsage, *load)
	}
	if err := checkMasterTimeout(*masterTimeout); err != nil {
		return err
	}
	plan, err := loadPlan(pos[0])
	if err != nil {
		return err
	}
	opts := []static.ClientOption{clientLog(e, pos[1]), static.WithPlan(plan), static.WithMasterTimeout(*masterTimeout)}
	if *dir == "" {
		*dir = static.DefaultDir(e.getenv)
	}
	opts = append(opts, static.WithClientDir(*dir))
	c, done, err := syntheticClient(plan, pos[1], *load, opts...)
	if err != nil {
		return err
	}
	defer done()
	return c.EnterScheduler(ctx)
}

func stmRun(ctx context.Context, e *stmEnv, args []string) error {
	fs := flag.NewFlagSet(e.name, flag.ContinueOnError)
	rf := addRunFlags(fs)
	load := fs.Float64("load", 0.5, "each runnable busy-waits this `fraction` of its WCET")
	masterTimeout := addMasterTimeout(fs)
	pos, err := e.parse(fs, args, "PLAN", 1)
	if err != nil {
		return err
	}
	if err := rf.check(); err != nil {
		return err
	}
	if err := checkMasterTimeout(*masterTimeout); err != nil {
		return err
	}
	plan, err := loadPlan(pos[0])
	if err != nil {
		return err
	}
	if *load < 0 || *load > 10 {
		return fmt.Errorf("%w: -load must be between 0 and 10, got %g", errUsage, *load)
	}
	if e.n <= 1 && !launch.Detect(e.getenv).Launched() {
		var clients []*static.Client
		for _, name := range plan.Clients {
			c, done, err := syntheticClient(plan, name, *load, clientLog(e, name), static.WithMasterTimeout(*masterTimeout))
			if err != nil {
				return err
			}
			defer done()
			clients = append(clients, c)
		}
		// Signals are pzrun's alone (main.go): its context's end stops the
		// run, and the record names the signal as stm master's does.
		opts := append(rf.options(e), static.WithSignals(false))
		run, err := static.RunLocal(ctx, plan, clients, opts...)
		if rerr := rf.report(e, run); err == nil {
			err = rerr
		}
		return err
	}
	return stmRanks(ctx, e, plan, rf, *load, *masterTimeout)
}

// stmRanks runs the plan with pzrun's ranks as clients (in-process ranks
// with -n, or the MPI world's processes on one machine under mpirun):
// rank 0 also runs the master; client i runs on rank i mod N. The socket
// directory is rank 0's, made private unless -dir names one.
func stmRanks(ctx context.Context, e *stmEnv, plan *static.Plan, rf runFlags, load float64, masterTimeout time.Duration) error {
	var mu sync.Mutex
	var run *static.Run
	var merr error
	body := func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		if rt.Size() > len(plan.Clients) {
			return fmt.Errorf("%w: %s for %s: use at most %s", errUsage, plural.Of(rt.Size(), "rank"), plural.Of(len(plan.Clients), "client"), plural.Of(len(plan.Clients), "rank"))
		}
		dir := *rf.dir
		if rt.Rank() == 0 && dir == "" {
			d, err := os.MkdirTemp("", "pz-stm-run-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(d)
			dir = d
		}
		dir, err := comm.BcastValue(ctx, rt.Comm(), dir, 0)
		if err != nil {
			return err
		}
		var wg sync.WaitGroup
		if rt.Rank() == 0 {
			opts := append(rf.options(e), static.WithDir(dir))
			m, err := static.NewMaster(plan, opts...)
			if err != nil {
				return err
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := m.Run(ctx)
				mu.Lock()
				run, merr = r, err
				mu.Unlock()
			}()
		}
		var names []string
		for i, name := range plan.Clients {
			if i%rt.Size() == rt.Rank() {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		errs := make([]error, len(names))
		for i, name := range names {
			c, done, err := syntheticClient(plan, name, load, static.WithClientDir(dir), static.WithPlan(plan), clientLog(e, name), static.WithMasterTimeout(masterTimeout))
			if err != nil {
				return err
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer done()
				errs[i] = c.EnterScheduler(ctx)
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	n := e.n
	if launch.Detect(e.getenv).Launched() {
		n = 0 // the MPI world
	}
	// Signals are pzrun's alone (main.go), as for the other apps.
	err := runtimeview.Run(ctx, n, body, runtimeview.WithGetenv(e.getenv), runtimeview.WithSignals(false))
	if merr != nil {
		err = merr
	}
	if rerr := rf.report(e, run); err == nil {
		err = rerr
	}
	return err
}

func stmAnalyze(_ context.Context, e *stmEnv, args []string) error {
	fs := flag.NewFlagSet(e.name, flag.ContinueOnError)
	svg := fs.String("svg", "", "draw the actual timeline under the planned one as SVG to `FILE`")
	periods := fs.Int("periods", 3, "periods drawn in the SVG")
	trace := fs.String("trace", "", "write the run in the Trace Event Format (Perfetto) to `FILE`")
	jsonOut := fs.Bool("json", false, "print JSON lines: one per runnable, then a summary")
	pos, err := e.parse(fs, args, "RUN.json", 1)
	if err != nil {
		return err
	}
	if err := checkOutFile("-svg", *svg); err != nil {
		return err
	}
	if err := checkOutFile("-trace", *trace); err != nil {
		return err
	}
	if *periods < 1 {
		return fmt.Errorf("%w: -periods %d: want at least 1 period to draw", errUsage, *periods)
	}
	f, err := os.Open(pos[0])
	if err != nil {
		return err
	}
	defer f.Close()
	run, err := static.ReadRun(f)
	if err != nil {
		return err
	}
	if *svg != "" {
		if err := writeFile(*svg, func(w io.Writer) error { return static.WriteRunSVG(w, run, *periods) }); err != nil {
			return err
		}
		// On stderr, as compile -svg says it: stdout may be -json's.
		fmt.Fprintf(e.stderr, "%s: drew the planned and actual timelines of %d periods in %s\n", e.name, *periods, *svg)
	}
	if *trace != "" {
		if err := writeFile(*trace, func(w io.Writer) error { return static.WriteRunTrace(w, run) }); err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "%s: wrote the run's trace (Perfetto) in %s\n", e.name, *trace)
	}
	a := static.Analyze(run)
	if *jsonOut {
		return a.WriteJSON(e.stdout)
	}
	return a.WriteText(e.stdout)
}
