package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// The MPI libraries pz builds against (comm/mpi.Library names them).
const (
	OpenMPI = "openmpi" // go build -tags mpi
	MPICH   = "mpich"   // go build -tags mpi,mpich
)

// ErrNoLauncher is wrapped by Launcher's errors when a library's tools
// are not installed.
var ErrNoLauncher = errors.New("launch: MPI launcher not found")

// Launcher starts jobs, and compiles C programs, with one MPI library's
// tools: a binary built against Open MPI must run under Open MPI's mpirun,
// one built against MPICH under MPICH's mpiexec. Everything in pz that
// starts a job itself (pzrun bench comm -backend mpi, the comm
// benchmark's C peer, tests that spawn their own jobs) goes through it.
type Launcher struct {
	// Library is OpenMPI or MPICH.
	Library string
	runs    []string // launcher commands to look for, in order
	ccs     []string // compiler wrappers to look for, in order
}

// For returns the Launcher of library (OpenMPI or MPICH). Debian installs
// both side by side: the suffixed commands (mpirun.openmpi,
// mpiexec.mpich) are preferred, so that each library gets its own tools
// whichever the plain mpirun and mpicc point at.
func For(library string) (Launcher, error) {
	switch library {
	case OpenMPI:
		return Launcher{Library: OpenMPI, runs: []string{"mpirun.openmpi", "mpirun"}, ccs: []string{"mpicc.openmpi", "mpicc"}}, nil
	case MPICH:
		return Launcher{Library: MPICH, runs: []string{"mpiexec.mpich", "mpiexec.hydra", "mpiexec"}, ccs: []string{"mpicc.mpich", "mpicc"}}, nil
	}
	return Launcher{}, fmt.Errorf("launch: unknown MPI library %q (want %q or %q)", library, OpenMPI, MPICH)
}

// Run returns the path of the library's job launcher.
func (l Launcher) Run() (string, error) { return l.find(l.runs) }

// Cc returns the path of the library's C compiler wrapper.
func (l Launcher) Cc() (string, error) { return l.find(l.ccs) }

func (l Launcher) find(names []string) (string, error) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: none of %v in PATH (install %s)", ErrNoLauncher, names, l.pkg())
}

func (l Launcher) pkg() string {
	if l.Library == MPICH {
		return "Debian's mpich and libmpich-dev"
	}
	return "Debian's openmpi-bin and libopenmpi-dev"
}

// Args returns the launcher's flags for n ranks on this machine. Open
// MPI: --oversubscribe (ranks may exceed cores) and, as root,
// --allow-run-as-root. MPICH's Hydra oversubscribes and runs as root as
// it is.
func (l Launcher) Args(n int) []string {
	args := []string{"-n", strconv.Itoa(n)}
	if l.Library == MPICH {
		return args
	}
	args = append(args, "--oversubscribe")
	if os.Geteuid() == 0 {
		args = append(args, "--allow-run-as-root")
	}
	return args
}

// StopGrace is how long a job started by Command has to end after its
// context ends and the launcher is sent SIGTERM, before the launcher is
// killed (SIGKILL). Open MPI's mpirun passes SIGTERM on to the ranks,
// kills those still running a second later, and removes the job's
// session directory ($TMPDIR/ompi.*) and shared-memory segments
// (/dev/shm/vader_segment.*); a killed mpirun leaves them behind.
const StopGrace = 5 * time.Second

// Command returns the command that runs argv on n ranks, or an error
// wrapping ErrNoLauncher. When ctx ends the launcher is sent SIGTERM, so
// that it stops the ranks and cleans up after the job, and is killed if
// it is still running StopGrace later (exec.Cmd's Cancel and WaitDelay;
// a caller may change them).
func (l Launcher) Command(ctx context.Context, n int, argv ...string) (*exec.Cmd, error) {
	run, err := l.Run()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, run, append(l.Args(n), argv...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = StopGrace
	return cmd, nil
}
