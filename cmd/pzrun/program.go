package main

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pzgo/pz/hardware"
	"github.com/pzgo/pz/internal/launch"
	"github.com/pzgo/pz/runtimeview"
)

// programGrace is how long pzrun waits for a launched program to end
// after passing it a stop signal, before it kills the program's process
// group: a little more than a pz program's own bound on its stop
// (runtimeview waits at most 30 s for the ranks' functions to return,
// then at most 30 s for the finalizers, and exits).
const programGrace = 65 * time.Second

// isProgram says whether pzrun's APP argument names a program to launch
// rather than a built-in app: a path (it has a '/'), as a shell runs
// ./prog rather than a command of that name.
func isProgram(name string) bool { return strings.ContainsRune(name, '/') }

// runProgram launches a user's pz program: with -n N it runs it with N
// in-process ranks (PZ_RANKS=N, which runtimeview.Run reads); under an
// MPI launcher each pzrun process starts the program as its rank, which
// joins the MPI world itself. The program's stdin, stdout and stderr are
// pzrun's (stdin nil: /dev/null). It runs in a process group of its own,
// in the terminal's foreground when pzrun's group had it: a Ctrl-C there
// reaches the program alone, once. A SIGINT or SIGTERM to pzrun (ctx's end,
// its cause a *stopSignal; SIGTERM for any other cause) is passed on to
// the program's group, and a second one on again kills that group, as
// does the end of programGrace; pzrun's status is then 128 plus the
// signal it received. Otherwise it is the program's status, and pzrun says
// why when it is not 0 or the signal's own.
func runProgram(ctx context.Context, n int, path string, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string, again <-chan os.Signal) int {
	info := launch.Detect(getenv)
	name := "pzrun"
	if info.Launched() && info.Rank >= 0 {
		name = fmt.Sprintf("pzrun (rank %d)", info.Rank)
	}
	if info.Launched() && n > 0 {
		// Every process has the same arguments: rank 0 says it, once.
		if info.Rank <= 0 {
			fmt.Fprintf(stderr, "pzrun: -n %d given under an MPI launcher (%s); let mpirun choose the ranks: mpirun -n %d pzrun %s\n", n, info.Launcher, n, path)
		}
		return exitUsage
	}
	// What the file system says about path, every process of one node
	// finds alike: under a launcher the node's first rank says it, once a
	// node, naming its rank (a node of a cluster may lack the file).
	pathErr := stderr
	if info.Launched() && !nodeSpeaker(info) {
		pathErr = io.Discard
	}
	if st, err := os.Stat(path); err != nil {
		fmt.Fprintf(pathErr, "%s: %v (a program to launch is a path, e.g. ./prog; the built-in apps are %s)\n", name, err, appNames())
		return exitUsage
	} else if st.IsDir() {
		// Never suggest "go build -o PATH": PATH exists, and the
		// suggestion would overwrite it (or a directory's contents).
		fmt.Fprintf(pathErr, "%s: %s is a directory, not a program: give the program's path (go build -o ./prog . in the package's directory, then pzrun ./prog)\n", name, path)
		return exitUsage
	} else if st.Mode().Perm()&0o111 == 0 {
		fmt.Fprintf(pathErr, "%s: %s is not executable: give a program built with go build (pz programs call runtimeview.Run), or make it executable if it is one\n", name, path)
		return exitUsage
	}
	if info.MultiRank() {
		// Each process would refuse to be one rank of many (launch.Check):
		// said once a node, with the rebuild.
		if msg := notBuiltWithMPI(path, info); msg != "" {
			fmt.Fprintf(pathErr, "%s: %s\n", name, msg)
			return exitUsage
		}
	}
	if !info.Launched() && n > 1 {
		// The program would refuse them itself (runtimeview.Run), once
		// started, as a failure: refuse them here, as for a built-in app,
		// as a usage error, before anything starts.
		if err := checkRanks(ctx, n); err != nil {
			fmt.Fprintf(stderr, "pzrun: -n %d: %v\n", n, err)
			return exitUsage
		}
	}
	if n > 1 {
		if why := notPzProgram(path); why != "" {
			fmt.Fprintf(stderr, "pzrun: note: %s %s: it runs once, as one process, and -n %d (%s=%d) gives it no ranks%s\n",
				path, why, n, runtimeview.EnvRanks, n, notPzHint(why, n))
		}
	}
	cmd := exec.Command(path, args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Env = os.Environ()
	if n > 0 {
		cmd.Env = append(withoutVar(cmd.Env, runtimeview.EnvRanks), runtimeview.EnvRanks+"="+strconv.Itoa(n))
	}
	p := programRun{name: name, path: path, stderr: stderr, again: again, grace: programGrace}
	return p.run(ctx, cmd)
}

// checkRanks refuses n in-process ranks that the machine's available
// memory cannot hold (runtimeview.CheckRankMemory, the check RunLocal
// makes); memory pzrun cannot read passes.
func checkRanks(ctx context.Context, n int) error {
	m, err := hardware.Discover(ctx, hardware.WithoutGPUs())
	if err != nil {
		return nil // the program's own check decides
	}
	return runtimeview.CheckRankMemory(n, m.Memory.AvailableBytes)
}

// nodeSpeaker says whether this process of an MPI job is the one of its
// node that reports what it finds on the node: its first rank there
// (local rank 0), or rank 0 when the launcher gives no local rank.
func nodeSpeaker(info launch.Info) bool {
	if info.LocalRank >= 0 {
		return info.LocalRank == 0
	}
	return info.Rank <= 0
}

// pzModule is the module a pz program depends on: pzrun's own (a fork's
// programs use the fork's), github.com/pzgo/pz when pzrun's build
// information is missing.
func pzModule() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Path != "" {
		return bi.Main.Path
	}
	return "github.com/pzgo/pz"
}

// notPzProgram says why the program at path cannot be a pz program, one
// that reads PZ_RANKS: "is not a Go program" or "is a Go program that
// does not use pz (...)"; "" when it is one or may start one (a script,
// a file pzrun cannot read).
func notPzProgram(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	head := make([]byte, 4)
	if _, err := io.ReadFull(f, head); err != nil || string(head[:2]) == "#!" {
		return "" // empty, or a script: it may start a pz program
	}
	bi, err := buildinfo.Read(f)
	if err != nil {
		if string(head) == "\x7fELF" {
			return "is not a Go program"
		}
		return "" // not an executable pzrun knows
	}
	mod := pzModule()
	if usesModule(bi, mod) {
		return ""
	}
	return fmt.Sprintf("is a Go program that does not use pz (no %s among its modules)", mod)
}

// notBuiltWithMPI says why the pz program at path cannot join the MPI
// job info describes, and what to do: it was built without the mpi build
// tag (its -tags build setting), so each of its processes would refuse
// to run. "" when it has the tag, is not a Go program using pz, or pzrun
// cannot read its build settings.
func notBuiltWithMPI(path string, info launch.Info) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	bi, err := buildinfo.Read(f)
	if err != nil || !usesModule(bi, pzModule()) {
		return ""
	}
	var tags []string
	for _, s := range bi.Settings {
		if s.Key == "-tags" && s.Value != "" {
			tags = strings.Split(s.Value, ",")
		}
	}
	if slices.Contains(tags, "mpi") {
		return ""
	}
	// The tags pzrun's own MPI build has (mpi, and mpich against MPICH):
	// the program must link the MPI library the launcher belongs to.
	tags = append(tags, "mpi")
	if own, ok := debug.ReadBuildInfo(); ok {
		for _, s := range own.Settings {
			if s.Key == "-tags" && slices.Contains(strings.Split(s.Value, ","), "mpich") && !slices.Contains(tags, "mpich") {
				tags = append(tags, "mpich")
			}
		}
	}
	size := "N"
	if info.Size > 0 {
		size = strconv.Itoa(info.Size)
	}
	pkg := bi.Path
	if pkg == "" || pkg == "command-line-arguments" {
		pkg = "."
	}
	return fmt.Sprintf("%s was built without -tags mpi: under the %s launcher each of its processes would refuse to run as one rank of %s; "+
		"rebuild it with MPI (needs the MPI development files, e.g. Debian's libopenmpi-dev): go build -tags %s -o %s %s (in its module), then mpirun -n %s pzrun %s; "+
		"or run it on in-process ranks, without mpirun: pzrun -n %s %s",
		path, info.Launcher, size, strings.Join(tags, ","), path, pkg, size, path, size, path)
}

// usesModule says whether the Go program of bi is module mod or depends
// on it.
func usesModule(bi *buildinfo.BuildInfo, mod string) bool {
	if bi.Main.Path == mod {
		return true
	}
	for _, d := range bi.Deps {
		if d.Path == mod {
			return true
		}
	}
	return false
}

// notPzHint is what notPzProgram's note adds for a program that is not a
// Go program: how to run it on n ranks if it is an MPI program.
func notPzHint(why string, n int) string {
	if why != "is not a Go program" {
		return ""
	}
	return fmt.Sprintf(" (a pz program's main calls runtimeview.Run; an MPI program of another kind runs under mpirun -n %d)", n)
}

// A programRun is one launch of a user's program: what runProgram
// checked and set up, and how long the program has to stop.
type programRun struct {
	name, path string // "pzrun" (with the rank under MPI), the program
	stderr     io.Writer
	again      <-chan os.Signal // a second stop signal; nil: none comes
	grace      time.Duration    // from passing a stop on to killing
}

// run starts cmd in a process group of its own, passes ctx's end on to
// it, waits for it and returns pzrun's exit status (see runProgram).
func (p *programRun) run(ctx context.Context, cmd *exec.Cmd) int {
	// The program's own group: a signal to pzrun's group (kill -- -PGID,
	// coreutils timeout) reaches pzrun only, which passes it on once;
	// with both, the program took two signals, and the second one ends
	// a pz program at once, without its finalizers.
	cmd.SysProcAttr = childProcAttr()
	tty := foregroundTTY(cmd.Stdin, cmd.Stdout, cmd.Stderr)
	if tty >= 0 {
		// The terminal's Ctrl-C goes to the program's group alone, and
		// the program can read the terminal.
		cmd.SysProcAttr.Foreground, cmd.SysProcAttr.Ctty = true, tty
	}
	started, done := make(chan error, 1), make(chan error, 1)
	go func() {
		// The kernel sends Pdeathsig (the program dies with pzrun, even
		// by SIGKILL) when the thread that started the child ends: start
		// and wait on one thread.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		done <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		fmt.Fprintf(p.stderr, "%s: %v\n", p.name, err)
		return exitFail
	}
	pgid := cmd.Process.Pid
	jc := startJobControl(pgid, tty)
	var (
		err      error
		received os.Signal // the stop passed on to the program
		killed   os.Signal // the signal for which pzrun killed it
		grace    <-chan time.Time
	)
	stop, again := ctx.Done(), p.again
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-stop:
			stop = nil
			if received = signalOf(ctx); received == nil {
				received = syscall.SIGTERM
			}
			signalGroup(pgid, received)
			t := time.NewTimer(p.grace)
			defer t.Stop()
			grace = t.C
		case s := <-again:
			again, grace = nil, nil
			fmt.Fprintf(p.stderr, "%s: %s again: killing %s (process group %d)\n", p.name, signalName(s), p.path, pgid)
			signalGroup(pgid, syscall.SIGKILL)
			killed = s
		case <-grace:
			grace = nil
			fmt.Fprintf(p.stderr, "%s: %s still running %v after %s: killing it (process group %d)\n", p.name, p.path, p.grace, signalName(received), pgid)
			signalGroup(pgid, syscall.SIGKILL)
			killed = received
		case s := <-jc.signals:
			jc.handle(s)
		}
	}
	jc.stop() // the terminal back to pzrun's group before pzrun writes
	if killed != nil {
		return runtimeview.ExitStatus(killed)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			s := ws.Signal()
			// Not for the stop pzrun passed on, a Ctrl-C or a closed pipe,
			// as a shell does not.
			if s != received && s != syscall.SIGINT && s != syscall.SIGPIPE {
				core := ""
				if ws.CoreDump() {
					core = ", core dumped"
				}
				fmt.Fprintf(p.stderr, "%s: %s was killed by %s (%v%s)\n", p.name, p.path, signalName(s), s, core)
			}
			return 128 + int(s)
		}
		code := ee.ExitCode()
		if code != runtimeview.ExitStatus(syscall.SIGINT) && (received == nil || code != runtimeview.ExitStatus(received)) {
			fmt.Fprintf(p.stderr, "%s: %s exited with status %d\n", p.name, p.path, code)
		}
		return code
	}
	fmt.Fprintf(p.stderr, "%s: %s: %v\n", p.name, p.path, err)
	return exitFail
}

// signalGroup sends sig to process group pgid; a group that is gone has
// nothing left to signal.
func signalGroup(pgid int, sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		_ = syscall.Kill(-pgid, s)
	}
}

// signalName names sig as a shell does: SIGTERM.
func signalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		if name := unix.SignalName(s); name != "" {
			return name
		}
	}
	return sig.String()
}

// withoutVar removes name from an environment list.
func withoutVar(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
