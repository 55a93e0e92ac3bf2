package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/mpi"
	"github.com/pzgo/pz/internal/launch"
	"github.com/pzgo/pz/logger"
	"github.com/pzgo/pz/runtimeview"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// errUsage marks errors that are the caller's fault (exit status 2).
var errUsage = errors.New("usage")

// env is what an app sees besides its RuntimeView.
type env struct {
	stdout io.Writer // written by the root rank only
	stderr io.Writer // diagnostics and logs
	// progress is the raw stderr for progress bars, which draw only when
	// it is a terminal (an *os.File); nil in help.
	progress io.Writer
	// rawStdout is the process's stdout, unwrapped, to tell whether it
	// is a terminal (nil in help).
	rawStdout io.Writer
	getenv    func(string) string
	// validate, when an app's setup sets it, checks the parsed flags
	// for a job of ranks ranks (-1: not known) before any rank starts,
	// writing notes to notes. Every process of an MPI job has the same
	// arguments and finds a usage error itself, before any
	// communication: rank 0 alone says it, and every process exits 2
	// without starting MPI.
	validate func(ranks int, notes io.Writer) error
	// mpiOptions, when an app's setup sets it, gives the comm/mpi options
	// of the World that pzrun starts under an MPI launcher; called once,
	// after the flags are parsed.
	mpiOptions func() []mpi.Option
}

// An app is one thing pzrun can run. Its flags are parsed once in the
// launching process; run is then called on every rank.
type app struct {
	name    string
	summary string
	// setup defines the app's flags on fs and returns the per-rank body,
	// which is called after fs is parsed.
	setup func(fs *flag.FlagSet, e *env) func(ctx context.Context, rt *runtimeview.RuntimeView) error
	// oneRank is set for apps that run on a single rank's scheduler: with
	// more ranks they run on the root only and the others wait.
	oneRank bool
}

// apps lists the built-in apps. "bench" apps are named "bench NAME".
func apps() []app {
	return []app{
		helloApp(),
		infoApp(),
		benchCommApp(),
		benchTasksApp(),
		choleskyApp(),
		gemmApp(),
		contextsApp(),
	}
}

func findApp(name string) (app, bool) {
	for _, a := range apps() {
		if a.name == name {
			return a, true
		}
	}
	return app{}, false
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: pzrun [-n N] [-comm-timeout D] [-cpuprofile FILE] APP [flags]")
	fmt.Fprintln(w, "       mpirun -n N pzrun APP [flags]   (binary built with -tags mpi)")
	fmt.Fprintln(w, "       pzrun [-n N] ./PROGRAM [args]   (your pz program: N in-process ranks; under mpirun, one rank per process)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "apps:")
	list := apps()
	sort.Slice(list, func(i, j int) bool { return list[i].name < list[j].name })
	for _, a := range list {
		fmt.Fprintf(w, "  %-12s %s\n", a.name, a.summary)
	}
	fmt.Fprintf(w, "  %-12s %s\n", "stm", "static periodic schedules: compile, master, client, run, analyze, bench (pzrun help stm)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "`pzrun help APP` or `pzrun APP -h` lists an app's flags; `pzrun help stm` the stm commands.")
}

// appUsage describes app a and its flags (defined on fs) to w: what
// `pzrun help APP` and `pzrun APP -h` print on stdout, and a bad flag on
// stderr.
func appUsage(w io.Writer, a app, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: pzrun [-n N] %s [flags]\n\n%s\n", a.name, a.summary)
	if a.oneRank {
		fmt.Fprintln(w, "It runs on one rank's scheduler: with several ranks, rank 0 runs it and the others wait.")
	}
	fmt.Fprintln(w, "\nflags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// benchUsage lists the benchmarks of `pzrun bench NAME`.
func benchUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: pzrun [-n N] bench NAME [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "benchmarks:")
	for _, a := range apps() {
		if name, ok := strings.CutPrefix(a.name, "bench "); ok {
			fmt.Fprintf(w, "  %-12s %s\n", name, a.summary)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "`pzrun help bench NAME` or `pzrun bench NAME -h` lists a benchmark's flags.")
}

// help is `pzrun help [APP]`: the usage, an app's flags (stm's commands,
// bench's benchmarks), or a usage error for an unknown app.
func help(ctx context.Context, words []string, stdout, stderr io.Writer, getenv func(string) string) int {
	switch {
	case len(words) == 0 || words[0] == "-h" || words[0] == "-help" || words[0] == "--help":
		usage(stdout)
		return exitOK
	case words[0] == "stm":
		if len(words) == 1 {
			stmUsage(stdout)
			return exitOK
		}
		return runSTM(ctx, 0, []string{words[1], "-h"}, stdout, stderr, getenv)
	case words[0] == "bench" && len(words) == 1:
		benchUsage(stdout)
		return exitOK
	}
	a, ok := lookup(words)
	if !ok || len(words) > len(strings.Fields(a.name)) {
		fmt.Fprintf(stderr, "pzrun help: %s\n", unknownApp(strings.Join(words, " ")))
		return exitUsage
	}
	fs := flag.NewFlagSet("pzrun "+a.name, flag.ContinueOnError)
	a.setup(fs, &env{stdout: io.Discard, stderr: io.Discard, getenv: getenv})
	appUsage(stdout, a, fs)
	return exitOK
}

func appNames() string {
	var names []string
	for _, a := range apps() {
		names = append(names, a.name)
	}
	names = append(names, "stm") // its own subcommands (runStm)
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// run is pzrun without the process: it returns the exit status. A
// launched program gets no stdin (/dev/null).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	code, _ := runApp(ctx, args, nil, stdout, stderr, getenv, nil)
	return code
}

// runApp is run, also saying whether the status is a launched program's
// own, which stands whatever pzrun received (a signal passed on to the
// program ends it with the status it chooses). stdin is a launched
// program's. A signal on again (a second stop signal, see relaySignals;
// nil: none comes) ends what runs at once: an app's ranks by exiting the
// process, a launched program by killing its process group.
func runApp(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string, again <-chan os.Signal) (code int, program bool) {
	code = runArgs(ctx, args, stdin, stdout, stderr, getenv, again, &program)
	return code, program
}

// globalFlags is pzrun's own flag set (the flags before APP) and its
// values.
func globalFlags() (global *flag.FlagSet, n *int, commTimeout *time.Duration, cpuProfile *string) {
	global = flag.NewFlagSet("pzrun", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	n = global.Int("n", 0, "run `N` in-process ranks on the embedded backend (not under mpirun)")
	commTimeout = global.Duration("comm-timeout", 0, "under MPI, end the job when one MPI operation waits this long, naming it (PZ_COMM_TIMEOUT)")
	cpuProfile = global.String("cpuprofile", "", "write a Go CPU profile of the app's run to `FILE` (under an MPI launcher, FILE.RANK from each rank's process); read it with go tool pprof")
	return global, n, commTimeout, cpuProfile
}

// runArgs is runApp; *program is set when APP is a program to launch.
func runArgs(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string, again <-chan os.Signal, program *bool) int {
	// Under an MPI launcher every process has the same arguments and
	// finds a usage error alike: rank 0 says it, once.
	job := launch.Detect(getenv)
	launched := job.Launched()
	usageErr := stderr
	if launched && job.Rank > 0 {
		usageErr = io.Discard
	}
	global, n, commTimeout, cpuProfile := globalFlags()
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return exitOK
		}
		fmt.Fprintf(usageErr, "pzrun: %v%s\n", err, flagHint(global, err))
		usage(usageErr)
		return exitUsage
	}
	nSet := false
	global.Visit(func(f *flag.Flag) { nSet = nSet || f.Name == "n" })
	if nSet && *n < 1 {
		fmt.Fprintf(usageErr, "pzrun: -n must be at least 1, got %d\n", *n)
		return exitUsage
	}
	if *commTimeout < 0 {
		fmt.Fprintf(usageErr, "pzrun: -comm-timeout %v: want a duration >= 0 (0 waits forever)\n", *commTimeout)
		return exitUsage
	}
	if *commTimeout > 0 && nSet && !launched {
		fmt.Fprintf(stderr, "pzrun: -comm-timeout bounds MPI operations; with -n %d the ranks run in-process (embedded backend), where it does nothing: run under mpirun (mpirun -n %d pzrun -comm-timeout %v ...)\n", *n, *n, *commTimeout)
		return exitUsage
	}
	if *commTimeout > 0 {
		// Read by comm/mpi's Init, here and in a program pzrun starts.
		if err := os.Setenv("PZ_COMM_TIMEOUT", commTimeout.String()); err != nil {
			fmt.Fprintf(stderr, "pzrun: -comm-timeout: %v\n", err)
			return exitFail
		}
	}
	rest := global.Args()
	if len(rest) == 0 {
		fmt.Fprintln(usageErr, "pzrun: no app given")
		usage(usageErr)
		return exitUsage
	}
	name := rest[0]
	rest = rest[1:]
	if *commTimeout > 0 && !launched && name != "help" && name != "bench" {
		fmt.Fprintf(stderr, "pzrun: note: -comm-timeout bounds MPI operations, and this run is not under an MPI launcher: it has none to bound\n")
	}
	if *cpuProfile != "" && (isProgram(name) || name == "stm") {
		fmt.Fprintf(usageErr, "pzrun: -cpuprofile profiles pzrun's apps (pzrun help), not %s: a program of yours profiles itself (runtime/pprof)\n", name)
		return exitUsage
	}
	if err := checkOutFile("-cpuprofile", *cpuProfile); err != nil {
		// Before the app runs, as the apps' own output files (outfile.go).
		fmt.Fprintf(usageErr, "pzrun: %s\n", trimUsage(err.Error()))
		return exitUsage
	}
	if isProgram(name) {
		*program = true
		return runProgram(ctx, *n, name, rest, stdin, stdout, stderr, getenv, again)
	}
	if name == "help" {
		return help(ctx, rest, stdout, stderr, getenv)
	}
	defer exitOnAgain(again, stderr)()
	if name == "stm" {
		return runSTM(ctx, *n, rest, stdout, stderr, getenv)
	}
	if name == "bench" {
		if len(rest) == 0 {
			fmt.Fprintln(usageErr, "pzrun: bench needs a benchmark name: comm or tasks")
			benchUsage(usageErr)
			return exitUsage
		}
		if rest[0] == "-h" || rest[0] == "-help" || rest[0] == "--help" {
			benchUsage(stdout)
			return exitOK
		}
		name, rest = "bench "+rest[0], rest[1:]
	}
	a, ok := findApp(name)
	if !ok {
		hint := ""
		if st, err := os.Stat(name); err == nil && !st.IsDir() {
			// A program of the user's is named by a path with a slash,
			// as a shell runs it.
			hint = fmt.Sprintf("; to run the program %s here, write ./%s", name, name)
		}
		fmt.Fprintf(usageErr, "pzrun: %s (see pzrun help)%s\n", unknownApp(name), hint)
		return exitUsage
	}
	// Ranks, loggers and progress bars may write at once.
	e := &env{stdout: &syncWriter{w: stdout}, stderr: &syncWriter{w: stderr}, progress: stderr, rawStdout: stdout, getenv: getenv}
	fs := flag.NewFlagSet("pzrun "+a.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // appUsage prints the flags
	body := a.setup(fs, e)
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			appUsage(stdout, a, fs)
			return exitOK
		}
		fmt.Fprintf(usageErr, "pzrun %s: %v%s\n", a.name, err, flagHint(fs, err))
		appUsage(usageErr, a, fs)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(usageErr, "pzrun %s: unexpected arguments %q\n", a.name, fs.Args())
		return exitUsage
	}
	if launched && *n > 0 {
		fmt.Fprintf(usageErr, "pzrun %s: -n %d given under an MPI launcher (%s); let mpirun choose the ranks: mpirun -n %d pzrun %s\n", a.name, *n, job.Launcher, *n, a.name)
		return exitUsage
	}
	if e.validate != nil {
		ranks := max(*n, 1)
		if launched {
			ranks = job.Size // -1 when the launcher does not say
		}
		if err := e.validate(ranks, usageErr); err != nil {
			fmt.Fprintf(usageErr, "pzrun %s: %s\n", a.name, trimUsage(err.Error()))
			if errors.Is(err, errUsage) {
				return exitUsage
			}
			return exitFail
		}
	}
	stopProfile, err := startCPUProfile(*cpuProfile, getenv)
	if err != nil {
		fmt.Fprintf(stderr, "pzrun: -cpuprofile: %v\n", err)
		return exitFail
	}
	err = launchApp(ctx, *n, a, body, e)
	if perr := stopProfile(); perr != nil {
		fmt.Fprintf(stderr, "pzrun: -cpuprofile: %v\n", perr)
		if err == nil {
			return exitFail
		}
	}
	if err != nil {
		if !errors.As(err, new(*reportedError)) {
			fmt.Fprintf(stderr, "pzrun %s: %s\n", a.name, describe(err))
		}
		if errors.Is(err, errUsage) || errors.Is(err, runtimeview.ErrLaunch) {
			return exitUsage
		}
		return exitFail
	}
	return exitOK
}

// sayStop writes "NAME: SIGTERM received: stopping" to stderr as soon as
// a stop signal ends ctx. The returned function stops the watch and
// waits for its goroutine.
func sayStop(ctx context.Context, name string, stderr io.Writer) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-ctx.Done():
			if s := signalOf(ctx); s != nil {
				fmt.Fprintf(stderr, "%s: %s received: stopping\n", name, signalName(s))
			}
		case <-quit:
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// A reportedError is an app's error that pzrun has already printed (a
// one-rank MPI job's, before MPI_Finalize: see launchApp).
type reportedError struct{ err error }

func (r *reportedError) Error() string { return r.err.Error() }
func (r *reportedError) Unwrap() error { return r.err }

// describe is err's message as pzrun prints it, without errUsage's
// "usage: " mark. In-process ranks fail together (comm.RankErrors, whose
// message names the ranks that failed alike once: "ranks 0-2: ..."); a
// usage error they all share is printed without them (each rank checked
// the same flags).
func describe(err error) string {
	var res comm.RankErrors
	if !errors.As(err, &res) || len(res) == 0 {
		return trimUsage(err.Error())
	}
	trimmed := make(comm.RankErrors, len(res))
	alike := true
	for i, re := range res {
		msg := trimUsage(re.Err.Error())
		trimmed[i] = &comm.RankError{Rank: re.Rank, Err: errors.New(msg)}
		alike = alike && msg == trimmed[0].Err.Error()
	}
	if alike && errors.Is(err, errUsage) {
		return trimmed[0].Err.Error()
	}
	return trimmed.Error()
}

// badOptions is an app's error for invalid options (wrapping sentinel,
// its package's ErrBadOptions) as pzrun prints it: a usage error (status
// 2) that says "invalid options" and what is wrong, without the layers
// of package names in front ("cholesky: apps: invalid options: ...").
func badOptions(err, sentinel error) error {
	msg := err.Error()
	if i := strings.Index(msg, sentinel.Error()+": "); i >= 0 {
		msg = msg[i+len(sentinel.Error())+2:]
	}
	return fmt.Errorf("%w: invalid options: %s", errUsage, msg)
}

// flagHint completes the flag package's errors where a user needs more:
// "invalid value "1" for flag -liveness: parse error" for a duration
// flag (the value needs its unit), and "flag provided but not defined:
// -n" after an app's name for one of pzrun's own flags (it goes before
// the app).
func flagHint(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		// pzrun's own flags go before the app's name; after it the app's
		// flag set meets them.
		if global, _, _, _ := globalFlags(); global.Lookup(name) != nil && fs.Lookup(name) == nil && fs.Name() != global.Name() {
			return fmt.Sprintf(" (-%s is pzrun's own flag: put it before the app, as in pzrun -%s ... %s)", name, name, strings.TrimPrefix(fs.Name(), "pzrun "))
		}
		return ""
	}
	i := strings.Index(msg, " for flag -")
	if i < 0 || !strings.HasSuffix(msg, ": parse error") {
		return ""
	}
	name := strings.TrimSuffix(msg[i+len(" for flag -"):], ": parse error")
	if f := fs.Lookup(name); f != nil {
		if g, ok := f.Value.(flag.Getter); ok {
			if _, ok := g.Get().(time.Duration); ok {
				return " (a duration with its unit: 1s, 500ms, 2m)"
			}
		}
	}
	return ""
}

// trimUsage drops the mark of errUsage from a message.
func trimUsage(msg string) string {
	return strings.TrimPrefix(msg, errUsage.Error()+": ")
}

// startCPUProfile starts a CPU profile written to path (path.RANK under
// an MPI launcher, each rank process writing its own); "" profiles
// nothing. The returned function stops it and closes the file.
func startCPUProfile(path string, getenv func(string) string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	if info := launch.Detect(getenv); info.Launched() && info.Rank >= 0 {
		path = fmt.Sprintf("%s.%d", path, info.Rank)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	}, nil
}

// syncWriter serializes writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// lookup finds the app named by words ("hello", or "bench comm").
func lookup(words []string) (app, bool) {
	if words[0] == "bench" && len(words) > 1 {
		return findApp("bench " + words[1])
	}
	return findApp(words[0])
}

// launchApp runs the app on the job's ranks (runtimeview.Run): the MPI
// world under an MPI launcher, n in-process ranks with -n, else one rank.
func launchApp(ctx context.Context, n int, a app, body func(context.Context, *runtimeview.RuntimeView) error, e *env) error {
	getenv := e.getenv
	if info := launch.Detect(getenv); info.Launched() && n > 0 {
		return fmt.Errorf("%w: -n %d given under an MPI launcher (%s); let mpirun choose the ranks: mpirun -n %d pzrun %s", errUsage, n, info.Launcher, n, a.name)
	}
	wrapped := body
	if a.oneRank {
		wrapped = func(ctx context.Context, rt *runtimeview.RuntimeView) error {
			var err error
			if rt.Rank() == 0 {
				if rt.Size() > 1 {
					// Say so rather than leave the other ranks idle in silence.
					others := "rank 1 waits"
					if rt.Size() > 2 {
						others = fmt.Sprintf("ranks 1-%d wait", rt.Size()-1)
					}
					fmt.Fprintf(e.stderr, "pzrun %s: runs on one rank's scheduler: rank 0 runs it, %s\n", a.name, others)
				}
				err = body(ctx, rt)
			}
			// The other ranks wait so that the job ends together; the
			// root's error is reported by the root.
			if berr := rt.Barrier(ctx); err == nil && rt.Rank() == 0 {
				err = berr
			}
			return err
		}
	}
	// Under MPI with several ranks, a rank that a stop signal does not
	// end within stopGrace ends the job (abortAfterStop).
	watched := wrapped
	wrapped = func(ctx context.Context, rt *runtimeview.RuntimeView) error {
		w := rt.MPIWorld()
		if w != nil && rt.Size() > 1 {
			stop, _ := abortAfterStop(ctx, "pzrun "+a.name, rt.Rank(), rt.Size(), stopGrace, e.stderr, w.Abort, os.Exit)
			defer stop()
			if rt.Rank() == 0 {
				// Said when the stop comes, as with one rank below: Open
				// MPI SIGKILLs the ranks a second after mpirun's SIGTERM,
				// before an app that looks at ctx only now and then (bench
				// comm, between sizes) has returned and before stopGrace.
				// Every rank gets mpirun's signal: rank 0 says it.
				say := sayStop(ctx, "pzrun "+a.name, e.stderr)
				defer say()
			}
		}
		if w == nil || rt.Size() > 1 {
			return watched(ctx, rt)
		}
		// One MPI rank: when mpirun ends the job (a SIGTERM to mpirun,
		// from a batch system or timeout), Open MPI SIGKILLs the rank a
		// second after its SIGTERM, and meanwhile the rank's
		// MPI_Finalize waits for the daemon that is ending the job: what
		// pzrun prints after the app has returned and MPI is finalized
		// is lost. So the stop is said when it comes, and the app's
		// error before MPI_Finalize. (Several ranks say it before
		// MPI_Abort: runtimeview.Run, abortAfterStop.)
		stop := sayStop(ctx, "pzrun "+a.name, e.stderr)
		err := watched(ctx, rt)
		stop()
		if err != nil {
			fmt.Fprintf(e.stderr, "pzrun %s: %s\n", a.name, describe(err))
			return &reportedError{err: err}
		}
		return nil
	}
	if n == 0 {
		n = 1 // pzrun ignores PZ_RANKS: -n is its way to ask for ranks
		if launch.Detect(getenv).Launched() {
			n = 0
		}
	}
	// Logs go to the app's stderr (the process's, or a test's buffer).
	// Signals are pzrun's alone (main.go): one handler, which cancels ctx,
	// so that every rank returns from its MPI calls before Close
	// finalizes MPI - never a Finalize from a handler while a rank is
	// inside MPI.
	opts := []runtimeview.Option{runtimeview.WithGetenv(getenv),
		runtimeview.WithLogOptions(logger.WithWriter(e.stderr)), runtimeview.WithSignals(false)}
	if e.mpiOptions != nil {
		opts = append(opts, runtimeview.WithMPIOptions(e.mpiOptions()...))
	}
	return runtimeview.Run(ctx, n, wrapped, opts...)
}
