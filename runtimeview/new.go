package runtimeview

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

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
// New then describes this rank's machine (hardware.Discover, unless
// WithMachine) and exchanges the descriptions among the ranks, so that
// every rank's ResourceSet is available on every rank without further
// communication. By default SIGINT and SIGTERM run Close and exit (see
// WithSignals). On error nothing is left initialized that New started.
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
		w, err := mpi.Init(ctx, cfg.mpiOpts...)
		if err != nil {
			return nil, fmt.Errorf("runtimeview: %w", err)
		}
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
	rt, err := build(ctx, c, backend, cfg, cfg.machine, teardown)
	if err != nil {
		return nil, err
	}
	rt.world, rt.aborting = world, aborting
	if signals {
		rt.sig = startSignals(func(s os.Signal) { rt.onSignal(s, cfg.exit) }, cfg.exit)
	}
	return rt, nil
}

// MPIWorld returns the MPI world New started or adopted, with what mpi.Init
// found out (thread level, ranks on this node, GOMAXPROCS sizing); nil on
// the other backends.
func (rt *RuntimeView) MPIWorld() *mpi.World { return rt.world }
