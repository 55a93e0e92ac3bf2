package runtimeview

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/pzgo/pz/comm"
	"github.com/pzgo/pz/comm/local"
	"github.com/pzgo/pz/comm/mpi"
	"github.com/pzgo/pz/internal/launch"
)

// WithMPIOptions passes options to mpi.Init when New starts or adopts MPI.
func WithMPIOptions(opts ...mpi.Option) Option {
	return func(c *config) { c.mpiOpts = append(c.mpiOpts, opts...) }
}

// WithMPIComm makes New run on a communicator a C or Fortran library (or
// the C program embedding Go) made, given as its C handle: an MPI_Comm
// converted to uintptr, `(uintptr_t)comm` in C. New initializes MPI if
// nobody has, or adopts it, and works on a duplicate of the communicator
// (mpi.World.Import), which Close frees; the library's communicator is
// left as it was. Every rank of that communicator calls New. Signal
// handling is off unless WithSignals(true) is given: the embedding
// program owns the process. The binary must be built with -tags mpi.
//
// The other way, rt.Comm() is an MPI communicator under the MPI backend:
// mpi.HandleOf and mpi.FortranOf give its handles to a library.
func WithMPIComm(handle uintptr) Option {
	return func(c *config) { c.mpiHandle, c.mpiHandleSet = handle, true }
}

// New returns this process's RuntimeView. It is collective: every rank
// calls it.
//
// The ranks are, in order of precedence:
//
//   - the communicator given with WithComm, adopted as it is;
//   - a duplicate of the MPI communicator given with WithMPIComm;
//   - the MPI world, when the binary was built with -tags mpi
//     (mpi.Available): New initializes MPI if nobody has (and Close then
//     finalizes it, after the callback stack), or adopts an MPI the
//     embedding program initialized (and leaves it running);
//   - otherwise one rank on the embedded backend. A binary without MPI
//     that finds itself launched by mpirun with several ranks returns an
//     error wrapping launch.ErrNotBuiltWithMPI that says how to rebuild,
//     rather than running N copies of rank 0.
//
// New never runs in-process ranks: PZ_RANKS (which Run reads, and
// `pzrun -n N` sets) set above 1 outside an MPI launcher gets a note on
// stderr saying to call Run, and New returns its one rank all the same.
//
// New then describes this rank's machine (hardware.Discover, unless
// WithMachine) and exchanges the descriptions among the ranks, so that
// every rank's ResourceSet is available on every rank without further
// communication. By default SIGINT and SIGTERM run Close and exit (see
// WithSignals). On error nothing is left initialized that New started.
//
// Under an MPI launcher with several ranks, New does not return when it
// fails on this rank after starting MPI (its ctx ended, by a signal
// under pzrun, say, or its machine could not be described): the other
// ranks wait for it in the hardware exchange, and MPI_Finalize would
// wait for them. It prints "pz: rank R of N failed: ERROR" on stderr and
// ends the job with MPI_Abort, with status 1 (128+signal when ctx's cause
// is a *SignalError), as Run does for a rank whose function fails. A
// rank whose ctx has ended before New starts MPI starts it all the same
// (the other ranks are starting it too), and then ends the job so.
func New(ctx context.Context, opts ...Option) (*RuntimeView, error) {
	cfg := newConfig(opts)
	var (
		c        comm.Comm
		backend  Backend
		teardown func() error
		world    *mpi.World
		aborting = new(atomic.Bool)
	)
	signals := true
	if cfg.comm == nil && !cfg.mpiHandleSet {
		noteEnvRanks(cfg)
	}
	switch {
	case cfg.comm != nil:
		c, backend, signals = cfg.comm, Adopted, false
	case cfg.mpiHandleSet:
		if !mpi.Available() {
			return nil, fmt.Errorf("runtimeview: WithMPIComm: %w", mpi.ErrNotBuilt)
		}
		w, err := mpi.Init(ctx, cfg.mpiOpts...)
		if err != nil {
			return nil, fmt.Errorf("runtimeview: %w", err)
		}
		imported, err := w.Import(ctx, cfg.mpiHandle)
		if err != nil {
			if w.Started() {
				err = errors.Join(err, w.Finalize())
			}
			return nil, fmt.Errorf("runtimeview: WithMPIComm: %w", err)
		}
		c, backend, world, signals = imported, MPI, w, false
		teardown = func() error {
			err := imported.Free()
			if aborting.Load() {
				return err
			}
			return errors.Join(err, w.Finalize())
		}
	case mpi.Available():
		job := launch.Detect(cfg.getenv)
		initCtx := ctx
		if job.Launched() && job.Size != 1 {
			// The other ranks start MPI and then wait for this one in
			// the hardware exchange: a rank whose ctx has already ended
			// (a signal, under pzrun) joins them anyway, so that its
			// failure below ends the job with MPI_Abort rather than
			// leave them to the launcher. MPI_Init cannot be
			// interrupted in any case.
			initCtx = context.WithoutCancel(ctx)
		}
		testPause(ctx, cfg.getenv, job.Rank, "init")
		w, err := mpi.Init(initCtx, cfg.mpiOpts...)
		if err != nil {
			return nil, fmt.Errorf("runtimeview: %w", err)
		}
		testPause(ctx, cfg.getenv, job.Rank, "exchange")
		c, backend, world = w, MPI, w
		teardown = func() error {
			if aborting.Load() {
				return nil // the job is being aborted: MPI_Abort, not MPI_Finalize
			}
			return w.Finalize()
		}
	default:
		if err := launch.Check(cfg.getenv, false); err != nil {
			return nil, fmt.Errorf("runtimeview: %w", err)
		}
		comms, err := local.New(1)
		if err != nil {
			return nil, fmt.Errorf("runtimeview: %w", err)
		}
		c, backend, teardown = comms[0], Local, comms[0].Free
	}
	if cfg.setSignals {
		signals = cfg.signals
	}
	// A rank of an MPI job of several ranks that fails here, after MPI_Init
	// (its ctx ended, its hardware could not be described), cannot
	// finalize MPI: the other ranks may be waiting for it in the hardware
	// exchange, and MPI_Finalize would wait for them. The teardown skips
	// MPI_Finalize until build succeeds, and the job is aborted.
	abortOnFail := backend == MPI && world != nil && world.Started() && world.Size() > 1
	aborting.Store(abortOnFail)
	rt, err := build(ctx, c, backend, cfg, cfg.machine, teardown)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
			// What ended ctx (a signal's error), beside the bare
			// context.Canceled a step returned.
			err = fmt.Errorf("%w: %w", err, cause)
		}
		if abortOnFail {
			abortNew(world, err, cfg.exit)
		}
		return nil, err
	}
	aborting.Store(false)
	rt.world, rt.aborting = world, aborting
	if world != nil {
		rt.setAbort(world.Abort)
	}
	if signals {
		rt.sig = startSignals(func(s os.Signal) { rt.onSignal(s, cfg.exit) }, cfg.exit)
	}
	return rt, nil
}

// noteEnvRanks says on cfg.stderr that New gives one rank when PZ_RANKS
// (`pzrun -n N` sets it) asks for several in-process ranks and no MPI
// launcher started the process: New never reads PZ_RANKS, and a program
// launched with `pzrun -n 4` would otherwise run one rank without a word.
func noteEnvRanks(cfg *config) {
	v := cfg.getenv(EnvRanks)
	k, err := strconv.Atoi(v)
	if err != nil || k <= 1 || launch.Detect(cfg.getenv).Launched() {
		return
	}
	fmt.Fprintf(cfg.stderr, "pz: note: %s=%s asks for %d in-process ranks, but runtimeview.New gives this process one rank (New takes the MPI world under mpirun, else one rank): call runtimeview.Run(ctx, 0, fn), which reads %s, to run %d in-process ranks\n",
		EnvRanks, v, k, EnvRanks, k)
}

// MPIWorld returns the MPI world New started or adopted, with what mpi.Init
// found out (thread level, ranks on this node, GOMAXPROCS sizing); nil on
// the other backends.
func (rt *RuntimeView) MPIWorld() *mpi.World { return rt.world }

// abortNew ends the MPI job of w, whose rank failed in New after MPI_Init
// (see New): it names the rank and the error on stderr and calls
// MPI_Abort with status 1, or 128+signal when a *SignalError ended New's
// context. exit is called if MPI_Abort returns.
func abortNew(w *mpi.World, cause error, exit func(int)) {
	code := 1
	var se *SignalError
	if errors.As(cause, &se) {
		code = ExitStatus(se.Signal)
	}
	fmt.Fprintf(os.Stderr, "pz: rank %d of %d failed: %v\npz: aborting the job (MPI_Abort)\n", w.Rank(), w.Size(), cause)
	err := w.Abort(code)
	fmt.Fprintf(os.Stderr, "pz: rank %d: %v\n", w.Rank(), err)
	exit(code)
}

// EnvTestPause names a test hook: set to "RANK:POINT", it makes that rank
// of an MPI job stop in New at POINT ("init": before MPI_Init;
// "exchange": after it, before the hardware exchange), say so on
// standard error ("pz: test hook: rank R (pid P) paused at POINT"), and
// wait there until New's context ends (at most two minutes), so that a
// test can signal it at that moment.
const EnvTestPause = "PZ_TEST_PAUSE_NEW"

func testPause(ctx context.Context, getenv func(string) string, rank int, point string) {
	v := getenv(EnvTestPause)
	if v == "" || v != fmt.Sprintf("%d:%s", rank, point) {
		return
	}
	fmt.Fprintf(os.Stderr, "pz: test hook: rank %d (pid %d) paused at %s\n", rank, os.Getpid(), point)
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Minute):
	}
}
